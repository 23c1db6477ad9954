"""Figure 4: what one turn adds to Temporal history, early and late in a long session.

History must stay flat per turn (references in history, transcripts in the
runtime store), or a session slows down and hits Temporal's 50 MB limit. The
scripted ledger flow makes 200 turns take seconds instead of minutes, and
exercises the same workflow code as a Claude session: an Update per message,
a `run_model` activity per segment, a publish per turn.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from temporalio.client import WorkflowHandle

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker, get_agent_snapshot
from dex_agents.testing import LedgerFlowConfig, ledger_flow

from . import _stats
from ._report import Row
from ._rig import BenchError, Rig

WINDOW = 10
"""Turns summarized per point: the median of 10 turns, not one noisy turn."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCost:
    """One turn of the long session."""

    turn: int
    history_bytes: int | None
    """Bytes the turn added; None when the session continued as new during it."""
    history_events: int | None
    turn_s: float
    """Message sent → the session idle again (the `wait_for_idle` Update returned)."""
    read_s: float
    """Then: the snapshot, with the transcript read from the runtime store."""


async def _history(handle: WorkflowHandle[Any, Any]) -> tuple[str, int, int]:
    info = (await handle.describe()).raw_description.workflow_execution_info
    return info.execution.run_id, info.history_size_bytes, info.history_length


async def history_per_turn(rig: Rig) -> tuple[list[Row], Any]:
    """Run one session for 200 turns and record each turn's history and time."""
    turns = 3 * WINDOW if rig.quick else 200
    gates = rig.directory("ledger-gates")
    flow = ledger_flow(
        LedgerFlowConfig(
            flow_type="BenchLongSession",
            ledger_path=str(rig.tmp / "ledger.jsonl"),
            gate_dir=str(gates),
        )
    )
    store = SQLiteRuntimeStore(rig.tmp / "ledger-runtime.sqlite")
    sessions = SessionClient(rig.client, flow, store)
    session_id = "long-session"
    handle = rig.client.get_workflow_handle(session_id)
    costs: list[TurnCost] = []
    try:
        async with create_worker(rig.client, [flow], store=store):
            await sessions.start(session_id)
            before = await _history(handle)
            for turn in range(1, turns + 1):
                started = time.monotonic()
                await sessions.send_user_message(session_id, f"say turn {turn}")
                await handle.execute_update("wait_for_idle", result_type=int)
                idle = time.monotonic()
                snapshot = await get_agent_snapshot(
                    rig.client, flow, session_id, store=store
                )
                read = time.monotonic()
                if snapshot.turns[-1].final_text != f"said: turn {turn}":
                    raise BenchError(f"turn {turn} ended {snapshot.turns[-1]}")
                after = await _history(handle)
                same_run = after[0] == before[0]
                costs.append(
                    TurnCost(
                        turn=turn,
                        history_bytes=after[1] - before[1] if same_run else None,
                        history_events=after[2] - before[2] if same_run else None,
                        turn_s=idle - started,
                        read_s=read - idle,
                    )
                )
                before = after
                if turn % 50 == 0:
                    rig.progress.log(f"4 long session: turn {turn}/{turns}")
            waits = await _idle_waits(sessions, handle, session_id)
    finally:
        await store.close()
    rows = [*_rows(costs, turns), _wait_row(waits)]
    return rows, {"turns": [asdict(c) for c in costs], "idle_waits": waits}


async def _idle_waits(
    sessions: SessionClient, handle: WorkflowHandle[Any, Any], session_id: str
) -> list[tuple[int, int]]:
    """History (bytes, events) that one `wait_for_idle` adds to an idle session.

    It is an Update, and Temporal persists every accepted Update, so a client
    that waits (or polls) grows the history even when no turn runs.
    """
    waits: list[tuple[int, int]] = []
    before = await _history(handle)
    for _ in range(WINDOW):
        await sessions.wait_for_idle(session_id)
        after = await _history(handle)
        waits.append((after[1] - before[1], after[2] - before[2]))
        before = after
    return waits


def _wait_row(waits: list[tuple[int, int]]) -> Row:
    sizes = [float(size) for size, _ in waits]
    events = _stats.median([float(n) for _, n in waits])
    return Row(
        key="4f",
        figure="history added by one `wait_for_idle` on an idle session",
        unit="B",
        median=_stats.median(sizes),
        p95=_stats.p95(sizes),
        samples=len(sizes),
        note=(
            f"{events:.0f} events per call: the wait is an Update, which Temporal "
            "persists, so waiting or polling grows history with no turn running; "
            "4a–4d include the one `wait_for_idle` each turn makes"
        ),
    )


def _window(costs: list[TurnCost], last: int) -> list[TurnCost]:
    return [c for c in costs if last - WINDOW < c.turn <= last]


def _bytes(costs: list[TurnCost]) -> list[float]:
    return [float(c.history_bytes) for c in costs if c.history_bytes is not None]


def _events(costs: list[TurnCost]) -> list[float]:
    return [float(c.history_events) for c in costs if c.history_events is not None]


def _wall(costs: list[TurnCost]) -> list[float]:
    return [c.turn_s + c.read_s for c in costs]


def _rows(costs: list[TurnCost], turns: int) -> list[Row]:
    middle = turns // 2
    points = [
        ("4a", f"turn 1 (turns 1–{WINDOW})", _window(costs, WINDOW)),
        (
            "4b",
            f"turn {middle} (turns {middle - WINDOW + 1}–{middle})",
            _window(costs, middle),
        ),
        (
            "4c",
            f"turn {turns} (turns {turns - WINDOW + 1}–{turns})",
            _window(costs, turns),
        ),
    ]
    first, last = points[0][2], points[-1][2]
    base_bytes = _stats.median(_bytes(first))
    rows: list[Row] = []
    for key, label, window in points:
        sizes = _bytes(window)
        ratio = _stats.median(sizes) / base_bytes
        later, flat = key != "4a", key == "4c"
        rows.append(
            Row(
                key=key,
                figure=f"history bytes added per turn at {label}",
                unit="B",
                median=_stats.median(sizes),
                p95=_stats.p95(sizes),
                samples=len(sizes),
                target="≤ 1.10× turn 1" if flat else "—",
                met=ratio <= 1.10 if flat else None,
                baseline=base_bytes if later else None,
                baseline_label="turn 1",
                ratio=ratio if later else None,
            )
        )
    events_first, events_last = _events(first), _events(last)
    events_mid = _events(points[1][2])
    rows.append(
        Row(
            key="4d",
            figure=f"history events added per turn at {points[-1][1]}",
            unit="events",
            median=_stats.median(events_last),
            p95=_stats.p95(events_last),
            samples=len(events_last),
            target="≤ 1.10× turn 1",
            met=_stats.median(events_last) <= 1.10 * _stats.median(events_first),
            baseline=_stats.median(events_first),
            baseline_label="turn 1",
            ratio=_stats.median(events_last) / _stats.median(events_first),
            note=f"at turn {middle}: {_stats.median(events_mid):.0f} events per turn",
        )
    )
    wall_first, wall_last = _wall(first), _wall(last)

    def ms(window: list[TurnCost], part: str) -> str:
        return f"{_stats.median([getattr(c, part) for c in window]) * 1000:.0f}"

    skipped = [c.turn for c in costs if c.history_bytes is None]
    note = (
        f"turn 1 → turn {turns} (medians): send → idle {ms(first, 'turn_s')} → "
        f"{ms(last, 'turn_s')} ms, then snapshot with transcript "
        f"{ms(first, 'read_s')} → {ms(last, 'read_s')} ms; scripted runner, no model"
    )
    if skipped:
        note += f"; continued as new during turns {skipped} (left out of 4a–4d)"
    rows.append(
        Row(
            key="4e",
            figure=f"wall time of one turn at {points[-1][1]}",
            unit="ms",
            median=_stats.median(wall_last) * 1000,
            p95=_stats.p95(wall_last) * 1000,
            samples=len(wall_last),
            target="≤ 1.10× turn 1",
            met=_stats.median(wall_last) <= 1.10 * _stats.median(wall_first),
            baseline=_stats.median(wall_first) * 1000,
            baseline_label="turn 1",
            ratio=_stats.median(wall_last) / _stats.median(wall_first),
            note=note,
        )
    )
    return rows

"""Figure 4: what one turn costs early and late in a long session of 10 KB messages.

History must stay flat per turn (references in history, transcripts and
finished turns in the runtime store), the carried state must not grow, and a
late turn must take as long as an early one, or a session slows down and
finally hits Temporal's limits. The scripted ledger flow makes 5,000 turns take
minutes instead of hours, and exercises the same workflow code as a Claude
session: an Update per message, a `run_model` activity per segment, a publish
per turn; each message is 10 KB (a pasted log), and so is each answer.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from temporalio.client import Client, WorkflowHandle

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow

from . import _stats
from ._report import Row
from ._rig import BenchError, Rig

WINDOW = 10
"""Turns summarized per point: the median of 10 turns, not one noisy turn."""
TURNS = 5000
BASE_TURN = 100
"""The wall-time baseline: turn 100, once the session is warm."""
WALL_WINDOW = 100
"""Turns summarized per wall-time point (4e)."""
SIDE_BY_SIDE = 150
"""The last turns of the long session, each run right after a turn of a young one.

Figure 4e compares the long session's last 100 turns with the young session's
turns 51–150, measured in the same minutes on the same engine and store: what
the session's age costs, apart from the machine's drift over a 6-minute run
(the sequential turn 100 vs turn 5,000 is figure 4h, for comparison).
"""
MESSAGE_BYTES = 10_240


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCost:
    """One turn of the long session."""

    turn: int
    history_bytes: int | None
    """Bytes the turn added; None when the session continued as new during it."""
    history_events: int | None
    turn_s: float
    """Message sent → `send_and_wait` returned the snapshot (its latest turn from the store)."""
    young_turn_s: float | None = None
    """The young session's turn run just before this one (the last turns only)."""
    carried_bytes: int | None = None
    """The state the session carried into the run that started during this turn."""


async def _history(handle: WorkflowHandle[Any, Any]) -> tuple[str, int, int]:
    info = (await handle.describe()).raw_description.workflow_execution_info
    return info.execution.run_id, info.history_size_bytes, info.history_length


async def _carried(client: Client, session_id: str, run_id: str) -> int:
    """Bytes of the continue-as-new input that started run `run_id`."""
    run = client.get_workflow_handle(session_id, run_id=run_id)
    async for event in run.fetch_history_events():
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        return sum(p.ByteSize() for p in payloads)
    return 0


def _message(turn: int) -> str:
    """`say turn <n>` and 10 KB of text: the answer quotes it whole."""
    head = f"say turn {turn} "
    return head + "log line of a pasted file; " * ((MESSAGE_BYTES - len(head)) // 27)


async def history_per_turn(rig: Rig) -> tuple[list[Row], Any]:
    """Run one session for 5,000 turns and record each turn's history and time."""
    turns = 3 * WINDOW if rig.quick else TURNS
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
    young_id = "young-session"
    side_by_side = min(SIDE_BY_SIDE, turns // 2)
    handle = rig.client.get_workflow_handle(session_id)
    costs: list[TurnCost] = []
    try:
        async with create_worker(rig.client, [flow], store=store):
            await sessions.start(session_id)
            before = await _history(handle)
            for turn in range(1, turns + 1):
                young_s = None
                if turn > turns - side_by_side:
                    young_turn = turn - (turns - side_by_side)
                    if young_turn == 1:
                        await sessions.start(young_id)
                    young_s = await _timed_turn(sessions, young_id, young_turn)
                message = _message(turn)
                started = time.monotonic()
                snapshot = await sessions.send_and_wait(session_id, message, turns=1)
                idle = time.monotonic()
                if not snapshot.turns[-1].final_text.startswith(f"said: turn {turn} "):
                    raise BenchError(f"turn {turn} ended {snapshot.turns[-1]}")
                after = await _history(handle)
                same_run = after[0] == before[0]
                costs.append(
                    TurnCost(
                        turn=turn,
                        history_bytes=after[1] - before[1] if same_run else None,
                        history_events=after[2] - before[2] if same_run else None,
                        turn_s=idle - started,
                        young_turn_s=young_s,
                        carried_bytes=None
                        if same_run
                        else await _carried(rig.client, session_id, after[0]),
                    )
                )
                before = after
                if turn % 500 == 0:
                    rig.progress.log(f"4 long session: turn {turn}/{turns}")
            waits = await _idle_waits(sessions, handle, session_id)
    finally:
        await store.close()
    rows = [*_rows(costs, turns), _wait_row(waits), _carried_row(costs, turns)]
    return rows, {"turns": [asdict(c) for c in costs], "idle_waits": waits}


async def _timed_turn(sessions: SessionClient, session_id: str, turn: int) -> float:
    started = time.monotonic()
    snapshot = await sessions.send_and_wait(session_id, _message(turn), turns=1)
    elapsed = time.monotonic() - started
    if not snapshot.turns[-1].final_text.startswith(f"said: turn {turn} "):
        raise BenchError(f"{session_id} turn {turn} ended {snapshot.turns[-1]}")
    return elapsed


async def _idle_waits(
    sessions: SessionClient, handle: WorkflowHandle[Any, Any], session_id: str
) -> list[tuple[int, int]]:
    """History (bytes, events) that one `wait_for_idle` adds to an idle session.

    An idle session is answered by a Query, which Temporal does not persist;
    only a wait on a busy session is an Update.
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
            f"{events:.0f} events per call: an idle session is answered by a Query "
            "(not persisted); in 4a–4d each turn is one `send_and_wait` Update "
            "(message and answer in one round trip)"
        ),
    )


def _carried_row(costs: list[TurnCost], turns: int) -> Row:
    carried = [(c.turn, c.carried_bytes) for c in costs if c.carried_bytes is not None]
    sizes = [float(b) for _, b in carried]
    last = carried[-1] if carried else (0, 0)
    listing = ", ".join(f"turn {t}: {b:,} B" for t, b in carried)
    return Row(
        key="4g",
        figure=f"state carried through continue-as-new, up to turn {turns}",
        unit="B",
        median=_stats.median(sizes) if sizes else 0.0,
        p95=max(sizes) if sizes else 0.0,
        samples=len(sizes),
        target="≤ 64 KB at any turn",
        met=max(sizes) <= 64 * 1024 if sizes else None,
        note=(
            f"the p95 column holds the largest; last at turn {last[0]}: {last[1]:,} B; "
            f"every continue-as-new (Temporal's suggestion): {listing or 'none'}"
        ),
    )


def _window(costs: list[TurnCost], last: int) -> list[TurnCost]:
    return [c for c in costs if last - WINDOW < c.turn <= last]


def _bytes(costs: list[TurnCost]) -> list[float]:
    return [float(c.history_bytes) for c in costs if c.history_bytes is not None]


def _events(costs: list[TurnCost]) -> list[float]:
    return [float(c.history_events) for c in costs if c.history_events is not None]


def _wall(costs: list[TurnCost]) -> list[float]:
    return [c.turn_s for c in costs]


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
    rows += _wall_rows(costs, turns, first)
    return rows


def _wall_rows(costs: list[TurnCost], turns: int, first: list[TurnCost]) -> list[Row]:
    """4e: the old session beside a young one; 4h: the same session, early vs late.

    Wall time is noisier than bytes: each point is the median of 100 turns (a
    10-turn window swung 1.02×–1.36× between runs of the same code), and the
    sequential comparison also holds whatever the machine did in between.
    """
    span = min(WALL_WINDOW, turns // 3)
    paired = [c for c in costs if c.young_turn_s is not None]
    skip = len(paired) - min(span, len(paired))
    late = paired[skip:]
    old_late = _wall(late)
    young = [c.young_turn_s for c in late if c.young_turn_s is not None]
    young_label = f"a young session's turns {skip + 1}–{len(paired)}, side by side"
    base_turn = min(BASE_TURN, turns // 2)
    base = [c for c in costs if abs(c.turn - base_turn) < span // 2 + 1][:span]
    base_label = f"turn {base_turn} (turns {base[0].turn}–{base[-1].turn})"
    wall_base = _wall(base)
    skipped = [c.turn for c in costs if c.history_bytes is None]
    window = f"turns {late[0].turn}–{late[-1].turn}"
    note = (
        f"message sent → `send_and_wait` returned with the latest turn (medians): "
        f"turn 1 {_stats.median(_wall(first)) * 1000:.0f} ms, {base_label} "
        f"{_stats.median(wall_base) * 1000:.0f} ms, turn {turns} "
        f"{_stats.median(old_late) * 1000:.0f} ms, the young session beside it "
        f"{_stats.median(young) * 1000:.0f} ms (each of its turns run just before "
        f"one of the old session's, on the same worker, engine and store); "
        f"scripted runner, no model, {MESSAGE_BYTES // 1024} KB messages and answers"
    )
    if skipped:
        note += f"; continued as new during turns {skipped} (left out of 4a–4d)"
    old_median, young_median = _stats.median(old_late), _stats.median(young)
    base_median = _stats.median(wall_base)
    return [
        Row(
            key="4e",
            figure=f"wall time of one turn at turn {turns} ({window}), beside a young session",
            unit="ms",
            median=old_median * 1000,
            p95=_stats.p95(old_late) * 1000,
            samples=len(old_late),
            target="≤ 1.10× the young session's",
            met=old_median <= 1.10 * young_median,
            baseline=young_median * 1000,
            baseline_label=young_label,
            ratio=old_median / young_median,
            note=note,
        ),
        Row(
            key="4h",
            figure=f"wall time of one turn at turn {turns} ({window}), vs its own turn {base_turn}",
            unit="ms",
            median=old_median * 1000,
            p95=_stats.p95(old_late) * 1000,
            samples=len(old_late),
            baseline=base_median * 1000,
            baseline_label=base_label,
            ratio=old_median / base_median,
            note=(
                "the same session measured minutes apart: the machine's drift "
                "(and the engine's and store's growing files) are in this ratio, "
                "not in 4e's"
            ),
        ),
    ]

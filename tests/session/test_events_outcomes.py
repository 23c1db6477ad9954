"""Every tool outcome is an event, every event has a timestamp, and a rerun turn is marked.

In-process workers for outcomes a tool reports or raises; a worker subprocess,
SIGKILLed mid-Step, for the outcomes only a crash makes (an unknown outcome,
a rerun model segment). `show` and `events` run as commands against the same
server and store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from click.testing import CliRunner, Result

from dex_agents.cli._app import main
from dex_agents.session import ToolCallFinishedEvent
from dex_agents.session._events import (
    EventRecord,
    SegmentRerunEvent,
    ToolCallAttemptFailedEvent,
    TurnCompletedEvent,
)
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing import Ledger, WorkerProcess
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.testing._worker_process import WorkerProcessConfig
from support.gates import gate_reached, open_gate
from support.session_harness import Harness, ledger_config

STARTED = datetime.now(UTC) - timedelta(minutes=1)


def assert_timestamped(events: list[EventRecord]) -> None:
    """Every event says when it happened: UTC, since this module loaded, in order."""
    assert events
    times = [datetime.fromisoformat(e.timestamp) for e in events]
    for event, at in zip(events, times, strict=True):
        assert at.tzinfo is not None and at.utcoffset() == timedelta(0), event
        assert STARTED <= at <= datetime.now(UTC) + timedelta(seconds=5), event
    # Cursor order is write order; a stamp is taken when the event happens,
    # which is never after a later event's write by more than a write's delay.
    assert times[-1] >= times[0]


def finished(events: list[EventRecord]) -> list[ToolCallFinishedEvent]:
    return [
        p for p in (e.payload() for e in events) if isinstance(p, ToolCallFinishedEvent)
    ]


async def test_a_failed_tool_call_is_an_event_with_the_tools_error(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "9", "invalid": true}'
    )
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    await harness.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[-1].tool_calls[0].status == "failed"

    events = await harness.sessions.events(sid)

    (outcome,) = finished(events)
    assert (outcome.status, outcome.tool_name) == ("failed", "create_refund")
    assert outcome.error == "order 9 cannot be refunded"
    assert outcome.attempts == 1
    assert outcome.timestamp
    assert_timestamped(events)


async def test_a_tool_that_raises_shows_each_attempts_error_then_an_unknown_outcome(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid,
        initial_message='call send_email {"to": "a@b.c", "fail_attempts": 9}',
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[-1].tool_calls[0].status == "outcome_unknown"

    events = await harness.sessions.events(sid)

    failures = [
        p
        for p in (e.payload() for e in events)
        if isinstance(p, ToolCallAttemptFailedEvent)
    ]
    assert [(f.attempt, f.retrying) for f in failures] == [
        (1, True),
        (2, True),
        (3, False),
    ]
    assert failures[0].error == "ConnectionError: mail server unavailable (attempt 1)"
    (outcome,) = finished(events)
    assert outcome.status == "outcome_unknown"
    assert outcome.error == "ConnectionError: mail server unavailable (attempt 3)"
    assert outcome.attempts == 3
    assert_timestamped(events)


async def test_rejected_and_skipped_calls_are_events_too(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid,
        initial_message='call create_refund {"orderId": "7"} && '
        'call lookup_order {"orderId": "7"} && call create_refund {"orderId": "8"}',
    )
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    await harness.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=False, rejection_message="not today"
    )
    await harness.sessions.wait_for_idle(sid)

    outcomes = finished(await harness.sessions.events(sid))

    # The read ran inside the segment (the runner's own event); the rest are
    # the session's: the rejected write, and the write after it that never ran.
    assert [(o.tool_name, o.status) for o in outcomes] == [
        ("lookup_order", "finished"),
        ("create_refund", "rejected"),
        ("create_refund", "skipped"),
    ]
    assert outcomes[1].rejection_message == "not today"


async def test_a_long_tool_output_rides_in_its_event_by_reference(
    harness: Harness,
) -> None:
    from dex_agents.temporal._events import bounded  # the sink's rule, on its own

    data, blobs = bounded({"tool_call_id": "c", "output": "x" * 20_000})
    assert len(str(data["output"])) <= 200
    ((blob_id, raw),) = blobs
    assert data["output_ref"] == {
        "blob_id": blob_id,
        "size": 20_000,
        "sha256": blob_id.removeprefix("out-"),
    }
    assert raw == b"x" * 20_000
    assert bounded({"output": "short"}) == ({"output": "short"}, [])


# ----- crashes ----------------------------------------------------------------


@dataclass
class KillRig:
    engine: EmbeddedEngine
    worker: WorkerProcess
    sessions: SessionClient
    store: SQLiteRuntimeStore
    store_path: Path
    ledger: Ledger
    gate_dir: Path

    async def reached(self, gate: str, timeout: float = 30.0) -> None:
        await gate_reached(self.gate_dir, gate, timeout)

    def open_gate(self, gate: str) -> None:
        open_gate(self.gate_dir, gate)

    async def run(self, *args: str) -> Result:
        """`dex-agents ARGS` against this rig's server and store, off the loop."""
        target = ["--state-dir", str(self.engine.state_dir)]
        target += ["--store", str(self.store_path)]
        return await asyncio.to_thread(CliRunner().invoke, main, [*args, *target])


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def kill_rig(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> AsyncIterator[KillRig]:
    """A worker subprocess on the run's dev server, which a test may SIGKILL."""
    client = await engine.client()
    config = ledger_config(tmp_path, flow_type)
    store_path = tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(store_path)
    worker = WorkerProcess(
        WorkerProcessConfig(
            address=engine.address,
            namespace=engine.namespace,
            store_path=str(store_path),
            flow=config,
        ),
        tmp_path,
    )
    with worker:
        yield KillRig(
            engine=engine,
            worker=worker,
            sessions=SessionClient(client, ledger_flow(config), store),
            store=store,
            store_path=store_path,
            ledger=Ledger(config.ledger_path),
            gate_dir=Path(config.gate_dir),
        )
    await store.close()


@pytest.mark.timeout(180)
async def test_a_kill_mid_write_is_an_outcome_unknown_event(kill_rig: KillRig) -> None:
    rig = kill_rig
    sid = "events-kill-mid-write"
    await rig.sessions.start(
        sid, initial_message='call create_refund {"orderId": "8", "gate": "refund"}'
    )
    (interrupt,) = (await rig.sessions.wait_for_idle(sid)).pending_interrupts
    await rig.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    await rig.reached("refund")
    rig.worker.kill()
    rig.open_gate("refund")
    rig.worker.start()
    await rig.sessions.wait_for_idle(sid)

    events = await rig.sessions.events(sid)

    (outcome,) = finished(events)
    assert (outcome.status, outcome.attempts) == ("outcome_unknown", 1)
    assert outcome.error  # what ended the Step: the crashed worker's timeout
    assert rig.ledger.count("create_refund") == 0
    assert_timestamped(events)

    result = await rig.run("events", sid)
    assert result.exit_code == 0, result.output
    assert "create_refund outcome_unknown" in result.stdout


@pytest.mark.timeout(180)
async def test_a_rerun_turn_is_marked_in_show_and_events(kill_rig: KillRig) -> None:
    rig = kill_rig
    sid = "events-kill-mid-model"
    await rig.sessions.start(sid, initial_message="say after crash ;; pause model")
    await rig.reached("model")
    rig.worker.kill()
    rig.open_gate("model")
    rig.worker.start()
    snap = await rig.sessions.wait_for_idle(sid)
    assert snap.turns[-1].reruns == 1

    events = await rig.sessions.events(sid)

    payloads = [e.payload() for e in events]
    (rerun,) = [p for p in payloads if isinstance(p, SegmentRerunEvent)]
    assert (rerun.step_execution_id, rerun.attempt) == ("turn-1/run_model/1", 2)
    (completed,) = [p for p in payloads if isinstance(p, TurnCompletedEvent)]
    assert completed.reruns == 1
    assert_timestamped(events)

    shown = await rig.run("show", sid)
    assert shown.exit_code == 0, shown.output
    (header,) = [line for line in shown.stdout.splitlines() if "turn-1" in line]
    assert "↻ rerun once (tools inside the CLI may have run again)" in header

    listed = await rig.run("events", sid)
    assert listed.exit_code == 0, listed.output
    assert "turn-1/run_model/1 runs again (attempt 2)" in listed.stdout
    lines = listed.stdout.splitlines()
    assert any("turn_completed" in line and "rerun once" in line for line in lines)

    as_json = await rig.run("events", sid, "--json")
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert all(r["data"]["timestamp"] for r in records)
    assert [r["data"]["reruns"] for r in records if r["type"] == "turn_completed"] == [
        1
    ]

"""Crash contract: real worker processes SIGKILLed at named points, side effects counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from dex_agents.session import StoredMessage
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing import Ledger, WorkerProcess
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.testing._worker_process import WorkerProcessConfig
from support.gates import gate_reached, open_gate
from support.session_harness import ledger_config


@dataclass
class CrashRig:
    engine: EmbeddedEngine
    client: Client
    worker: WorkerProcess
    sessions: SessionClient
    store: SQLiteRuntimeStore
    ledger: Ledger
    gate_dir: Path

    async def reached(self, gate: str, timeout: float = 30.0) -> None:
        """Wait until the worker stopped at `gate` (a condition, polled with a deadline)."""
        await gate_reached(self.gate_dir, gate, timeout)

    def open_gate(self, gate: str) -> None:
        open_gate(self.gate_dir, gate)


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def crash_rig(
    tmp_path: Path, flow_type: str, request: pytest.FixtureRequest
) -> AsyncIterator[CrashRig]:
    """Its own dev server (tests restart it) and a worker subprocess.

    A test marked `@pytest.mark.ledger(**overrides)` gets its flow with them.
    """
    marker = request.node.get_closest_marker("ledger")
    overrides = marker.kwargs if marker else {}
    async with EmbeddedEngine(state_dir=tmp_path / "engine") as engine:
        client = await engine.client()
        config = ledger_config(tmp_path, flow_type, **overrides)
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
            yield CrashRig(
                engine=engine,
                client=client,
                worker=worker,
                sessions=SessionClient(client, ledger_flow(config), store),
                store=store,
                ledger=Ledger(config.ledger_path),
                gate_dir=Path(config.gate_dir),
            )
        await store.close()


# A module mark: pytest-timeout reads the limit before fixtures run.
pytestmark = pytest.mark.timeout(180)


async def test_write_waits_through_worker_kill_and_server_restart_then_runs_once(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-approval"
    await crash_rig.sessions.start(
        sid, initial_message='call create_refund {"orderId": "7"}'
    )
    snap = await crash_rig.sessions.wait_for_idle(sid)
    (interrupt,) = snap.pending_interrupts
    crash_rig.worker.kill()
    await crash_rig.engine.restart(kill=True)
    crash_rig.worker.start()
    snap = await crash_rig.sessions.snapshot(sid)
    assert snap.status == "waiting_for_approval"
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt.interrupt_id]
    assert crash_rig.ledger.count("create_refund_started") == 0
    assert await crash_rig.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    snap = await crash_rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: create_refund=refunded order 7"
    assert crash_rig.ledger.count("create_refund") == 1


async def test_kill_during_single_attempt_tool_records_outcome_unknown(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-single-attempt"
    await crash_rig.sessions.start(
        sid, initial_message='call create_refund {"orderId": "8", "gate": "refund"}'
    )
    (interrupt,) = (await crash_rig.sessions.wait_for_idle(sid)).pending_interrupts
    await crash_rig.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    await crash_rig.reached("refund")
    crash_rig.worker.kill()
    crash_rig.open_gate(
        "refund"
    )  # a rerun would pass the gate and write: it must not happen
    crash_rig.worker.start()
    snap = await crash_rig.sessions.wait_for_idle(sid)
    (record,) = snap.turns[0].tool_calls
    assert (record.status, record.attempts) == ("outcome_unknown", 1)
    assert "outcome of create_refund is unknown" in snap.turns[0].final_text
    assert crash_rig.ledger.count("create_refund_started") == 1
    assert crash_rig.ledger.count("create_refund") == 0


async def test_kill_during_run_model_reruns_and_hides_crashed_attempt(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-run-model"
    await crash_rig.sessions.start(
        sid, initial_message="say after crash ;; pause model"
    )
    await crash_rig.reached("model")
    # What a crashed attempt may have written before dying: a segment under its own key.
    crashed = "turn-1/run_model/1/attempt-1"
    await crash_rig.store.put_segment(
        sid, crashed, None, [StoredMessage(role="assistant", text="CRASHED", item={})]
    )
    crash_rig.worker.kill()
    crash_rig.open_gate("model")
    crash_rig.worker.start()
    snap = await crash_rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "said: after crash"
    assert snap.transcript_head == "turn-1/run_model/1/attempt-2"
    assert "CRASHED" not in [m.text for m in snap.messages]
    assert [m.text for m in await crash_rig.store.read_segment(sid, crashed)] == [
        "CRASHED"
    ]


async def test_an_inline_call_a_killed_attempt_left_running_ends_before_the_rerun(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-inline-call"
    await crash_rig.sessions.start(
        sid, initial_message='call lookup_order {"orderId": "7", "gate": "lookup"}'
    )
    await crash_rig.reached("lookup")  # the read runs inside attempt 1's segment
    crash_rig.worker.kill()
    crash_rig.open_gate("lookup")
    crash_rig.worker.start()
    snap = await crash_rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: order 7: arrived broken"
    assert crash_rig.ledger.count("lookup_order") == 2  # a read runs again

    calls = [
        (e.attempt, e.type, e.data.get("status"))
        for e in await crash_rig.sessions.events(sid)
        if e.type.startswith("tool_call_") or e.type == "segment_rerun"
    ]
    # Attempt 1 died with its call running; attempt 2 ends that call before it
    # reruns the segment, so no reader shows it running forever.
    assert calls == [
        (1, "tool_call_started", None),
        (2, "tool_call_finished", "outcome_unknown"),
        (2, "segment_rerun", None),
        (2, "tool_call_started", None),
        (2, "tool_call_finished", "finished"),
    ]
    ended = [
        e
        for e in await crash_rig.sessions.events(sid)
        if e.type == "tool_call_finished" and e.data["status"] == "outcome_unknown"
    ]
    assert ended[0].data["tool_name"] == "lookup_order"
    assert "runs again as attempt 2" in str(ended[0].data["error"])


@pytest.mark.ledger(run_model_attempts=1)
async def test_an_inline_call_the_last_attempt_left_running_ends_before_the_turn_fails(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-inline-call-last-attempt"
    await crash_rig.sessions.start(
        sid, initial_message='call lookup_order {"orderId": "7", "gate": "lookup"}'
    )
    await crash_rig.reached("lookup")
    crash_rig.worker.kill()
    crash_rig.worker.start()  # no attempt follows: the turn fails
    snap = await crash_rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].status == "failed"
    async with asyncio.timeout(30):  # the session publishes its end after idle
        while not any(
            e.type == "turn_failed" for e in await crash_rig.sessions.events(sid)
        ):
            await asyncio.sleep(0.05)
    events = await crash_rig.sessions.events(sid)
    calls = [
        (e.attempt, e.type, e.data.get("status"))
        for e in events
        if e.type.startswith("tool_call_") or e.type == "turn_failed"
    ]
    # Ended in the attempt that ran it, before the turn's end.
    assert calls == [
        (1, "tool_call_started", None),
        (1, "tool_call_finished", "outcome_unknown"),
        (0, "turn_failed", None),
    ]
    started, finished = [e for e in events if e.type.startswith("tool_call_")]
    assert finished.step_execution_id == started.step_execution_id
    assert finished.seq > started.seq
    assert "the model segment ended while the call ran, and the turn failed: " in str(
        finished.data["error"]
    )
    assert crash_rig.ledger.count("lookup_order") == 1


async def test_kill_during_idempotent_write_retries_with_the_same_key(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-call-tool"
    await crash_rig.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "gate": "mail"}'
    )
    await crash_rig.reached("mail")
    crash_rig.worker.kill()
    crash_rig.worker.start()
    snap = await crash_rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: send_email=sent to a@b.c"
    attempts = crash_rig.ledger.entries("send_email_attempt")
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert [a["key"] for a in attempts] == [f"{sid}/turn-1/call_turn-1_0"] * 2
    assert crash_rig.ledger.count("send_email") == 1


async def test_a_heartbeat_checkpoint_reaches_the_attempt_after_a_kill(
    crash_rig: CrashRig,
) -> None:
    sid = "crash-checkpoint"
    await crash_rig.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "gate": "mail"}'
    )
    await crash_rig.reached("mail")
    # Checkpoints travel with throttled heartbeats: kill only once the server has it.
    handle = crash_rig.client.get_workflow_handle(sid)
    async with asyncio.timeout(30):
        while True:
            pending = (await handle.describe()).raw_description.pending_activities
            details = [
                await crash_rig.client.data_converter.decode(
                    p.heartbeat_details.payloads
                )
                for p in pending
                if p.heartbeat_details.payloads
            ]
            if [{"reached_attempt": 1}] in details:
                break
            await asyncio.sleep(0.05)
    crash_rig.worker.kill()
    crash_rig.worker.start()
    snap = await crash_rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].tool_calls[0].status == "finished"
    attempts = crash_rig.ledger.entries("send_email_attempt")
    assert [a["checkpoint"] for a in attempts] == [None, {"reached_attempt": 1}]
    assert crash_rig.ledger.count("send_email") == 1


async def test_snapshot_comes_from_the_store_when_no_worker_runs(
    crash_rig: CrashRig,
) -> None:
    sid = "no-worker-snapshot"
    await crash_rig.sessions.start(sid, initial_message="say kept")
    live = await crash_rig.sessions.wait_for_idle(sid)
    crash_rig.worker.kill()
    projected = await crash_rig.sessions.snapshot(sid)
    assert projected.updated_at  # only the store's projection carries a timestamp
    assert [t.final_text for t in projected.turns] == ["said: kept"]
    assert [m.text for m in projected.messages] == [m.text for m in live.messages]

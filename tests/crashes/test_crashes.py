"""Crash contract: real worker processes SIGKILLed at named points, side effects counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from support.session_harness import make_config
from temporalio.client import Client

from dex_agents.session import StoredMessage
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing import Ledger, WorkerProcess, WorkerProcessConfig
from dex_agents.testing._ledger_flow import ledger_flow


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
        async with asyncio.timeout(timeout):
            while not (self.gate_dir / f"{gate}.reached").exists():
                await asyncio.sleep(0.02)

    def open_gate(self, gate: str) -> None:
        (self.gate_dir / gate).write_text("")


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def rig(tmp_path: Path, flow_type: str) -> AsyncIterator[CrashRig]:
    """Its own dev server (tests restart it) and a worker subprocess."""
    async with EmbeddedEngine(state_dir=tmp_path / "engine") as engine:
        client = await engine.client()
        config = make_config(tmp_path, flow_type)
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
    rig: CrashRig,
) -> None:
    sid = "crash-approval"
    await rig.sessions.start(sid, initial_message='call create_refund {"orderId": "7"}')
    snap = await rig.sessions.wait_for_idle(sid)
    (interrupt,) = snap.pending_interrupts
    rig.worker.kill()
    await rig.engine.restart(kill=True)
    rig.worker.start()
    snap = await rig.sessions.snapshot(sid)
    assert snap.status == "waiting_for_approval"
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt.interrupt_id]
    assert rig.ledger.count("create_refund_started") == 0
    assert await rig.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    snap = await rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: create_refund=refunded order 7"
    assert rig.ledger.count("create_refund") == 1


async def test_kill_during_single_attempt_tool_records_outcome_unknown(
    rig: CrashRig,
) -> None:
    sid = "crash-single-attempt"
    await rig.sessions.start(
        sid, initial_message='call create_refund {"orderId": "8", "gate": "refund"}'
    )
    (interrupt,) = (await rig.sessions.wait_for_idle(sid)).pending_interrupts
    await rig.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    await rig.reached("refund")
    rig.worker.kill()
    rig.open_gate("refund")  # a rerun would pass the gate and write: it must not happen
    rig.worker.start()
    snap = await rig.sessions.wait_for_idle(sid)
    (record,) = snap.turns[0].tool_calls
    assert (record.status, record.attempts) == ("outcome_unknown", 1)
    assert "outcome of create_refund is unknown" in snap.turns[0].final_text
    assert rig.ledger.count("create_refund_started") == 1
    assert rig.ledger.count("create_refund") == 0


async def test_kill_during_run_model_reruns_and_hides_crashed_attempt(
    rig: CrashRig,
) -> None:
    sid = "crash-run-model"
    await rig.sessions.start(sid, initial_message="say after crash ;; pause model")
    await rig.reached("model")
    # What a crashed attempt may have written before dying: a segment under its own key.
    crashed = "turn-1/run_model/1/attempt-1"
    await rig.store.put_segment(
        sid, crashed, None, [StoredMessage(role="assistant", text="CRASHED", item={})]
    )
    rig.worker.kill()
    rig.open_gate("model")
    rig.worker.start()
    snap = await rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "said: after crash"
    assert snap.transcript_head == "turn-1/run_model/1/attempt-2"
    assert "CRASHED" not in [m.text for m in snap.messages]
    assert [m.text for m in await rig.store.read_segment(sid, crashed)] == ["CRASHED"]


async def test_kill_during_idempotent_write_retries_with_the_same_key(
    rig: CrashRig,
) -> None:
    sid = "crash-call-tool"
    await rig.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "gate": "mail"}'
    )
    await rig.reached("mail")
    rig.worker.kill()
    rig.worker.start()
    snap = await rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: send_email=sent to a@b.c"
    attempts = rig.ledger.entries("send_email_attempt")
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert [a["key"] for a in attempts] == [f"{sid}/turn-1/call_turn-1_0"] * 2
    assert rig.ledger.count("send_email") == 1


async def test_a_heartbeat_checkpoint_reaches_the_attempt_after_a_kill(
    rig: CrashRig,
) -> None:
    sid = "crash-checkpoint"
    await rig.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "gate": "mail"}'
    )
    await rig.reached("mail")
    # Checkpoints travel with throttled heartbeats: kill only once the server has it.
    handle = rig.client.get_workflow_handle(sid)
    async with asyncio.timeout(30):
        while True:
            pending = (await handle.describe()).raw_description.pending_activities
            details = [
                await rig.client.data_converter.decode(p.heartbeat_details.payloads)
                for p in pending
                if p.heartbeat_details.payloads
            ]
            if [{"reached_attempt": 1}] in details:
                break
            await asyncio.sleep(0.05)
    rig.worker.kill()
    rig.worker.start()
    snap = await rig.sessions.wait_for_idle(sid)
    assert snap.turns[0].tool_calls[0].status == "finished"
    attempts = rig.ledger.entries("send_email_attempt")
    assert [a["checkpoint"] for a in attempts] == [None, {"reached_attempt": 1}]
    assert rig.ledger.count("send_email") == 1


async def test_snapshot_comes_from_the_store_when_no_worker_runs(rig: CrashRig) -> None:
    sid = "no-worker-snapshot"
    await rig.sessions.start(sid, initial_message="say kept")
    live = await rig.sessions.wait_for_idle(sid)
    rig.worker.kill()
    projected = await rig.sessions.snapshot(sid)
    assert projected.updated_at  # only the store's projection carries a timestamp
    assert [t.final_text for t in projected.turns] == ["said: kept"]
    assert [m.text for m in projected.messages] == [m.text for m in live.messages]

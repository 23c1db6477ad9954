"""Connector tools under SIGKILLed workers: a worker subprocess, the fake CLI, counted effects.

The worker runs in a subprocess (`WorkerProcess`, serving
`connector_worker_agent:flow_from_env`); an operation stops at a gate, the test
SIGKILLs the worker, opens the gate, starts a new worker, and counts in the
provider's ledger what reached the provider and under which call ID.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.session._state import Interrupt
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.temporal._snapshot import AgentSnapshot
from dex_agents.testing import Ledger, WorkerProcess
from dex_agents.testing._worker_process import WorkerProcessConfig
from support import SUPPORT_DIR
from support.connector_worker_agent import (
    CONFIG_ENV,
    ConnectorWorkerConfig,
    build_flow,
)
from support.fake_cli import with_support_importable
from support.gates import gate_reached, open_gate

pytestmark = pytest.mark.timeout(240)

AGENT_FILE = SUPPORT_DIR / "connector_worker_agent.py"


@dataclass(kw_only=True)
class CrashRig:
    """One test's session client, the provider's ledger, its gates and the worker."""

    sessions: SessionClient
    ledger: Ledger
    gate_dir: Path
    worker: WorkerProcess

    async def reached(self, gate: str, timeout: float = 60.0) -> None:
        """Wait until an operation stopped at `gate`."""
        await gate_reached(self.gate_dir, gate, timeout)

    def open_gate(self, gate: str) -> None:
        """Let whatever waits at `gate` go on (and pass it at once from now on)."""
        open_gate(self.gate_dir, gate)

    async def interrupt(self, session_id: str) -> Interrupt:
        """The one approval the idle session waits for."""
        snap = await self.sessions.wait_for_idle(session_id)
        assert snap.status == "waiting_for_approval", snap
        (interrupt,) = snap.pending_interrupts
        return interrupt

    async def approve(self, session_id: str) -> Interrupt:
        """Approve the one pending approval; the turn goes on (maybe to a gate)."""
        interrupt = await self.interrupt(session_id)
        assert await self.sessions.resolve_interrupt(
            session_id, interrupt.interrupt_id, approved=True
        )
        return interrupt

    async def idle(self, session_id: str) -> AgentSnapshot:
        return await self.sessions.wait_for_idle(session_id)


@asynccontextmanager
async def connector_worker(
    engine: EmbeddedEngine, client: Client, flow_type: str, tmp_path: Path
) -> AsyncIterator[CrashRig]:
    """The connector agent served by a worker subprocess that the test may SIGKILL."""
    config = ConnectorWorkerConfig(
        flow_type=flow_type,
        ledger_path=str(tmp_path / "ledger.jsonl"),
        gate_dir=str(tmp_path / "gates"),
        workdir=str(tmp_path / "sessions"),
    )
    store_path = tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(store_path)
    worker = WorkerProcess(
        WorkerProcessConfig(
            address=engine.address,
            namespace=engine.namespace,
            store_path=str(store_path),
            flow_ref=f"{AGENT_FILE}:flow_from_env",
        ),
        tmp_path,
        env=with_support_importable({**os.environ, CONFIG_ENV: config.to_json()}),
    )
    try:
        with worker:
            yield CrashRig(
                # The client side needs only the flow's type and task queue.
                sessions=SessionClient(client, build_flow(config), store),
                ledger=Ledger(config.ledger_path),
                gate_dir=Path(config.gate_dir),
                worker=worker,
            )
    finally:
        await store.close()


async def test_a_mutation_approved_across_a_worker_restart_runs_once(
    engine: EmbeddedEngine, client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_worker(engine, client, flow_type, tmp_path) as rig:
        sid = "approve-after-restart"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call transfer {"account": "a", "amount": 5}',
        )
        interrupt = await rig.interrupt(sid)
        assert (interrupt.tool_name, interrupt.effect) == (
            "transfer",
            "non_idempotent_write",
        )
        rig.worker.kill()
        rig.worker.start()
        assert rig.worker.starts == 2
        assert rig.ledger.entries() == []
        assert await rig.sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await rig.idle(sid)
        assert snap.turns[0].final_text == "done: transferred 5 to a"
        assert [(r.tool_call_id, r.status) for r in snap.turns[0].tool_calls] == [
            (interrupt.tool_call_id, "finished")
        ]
        (entry,) = rig.ledger.entries()
        assert (entry["kind"], entry["account"], entry["amount"]) == (
            "ledger_entry",
            "a",
            5,
        )


async def test_sigkill_during_a_retry_safe_mutation_retries_under_the_same_call_id(
    engine: EmbeddedEngine, client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_worker(engine, client, flow_type, tmp_path) as rig:
        sid = "kill-mid-payment"
        # Retry safe and approval-free: it runs in its tool Step at once. The
        # provider applies it, then the operation stops before it answers.
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call post_payment {"account": "a", '
            '"amount": 5, "gate": "pay"}',
        )
        await rig.reached("pay")
        assert rig.ledger.count("payment") == 1
        rig.worker.kill()
        rig.open_gate("pay")
        rig.worker.start()
        snap = await rig.idle(sid)
        (record,) = snap.turns[0].tool_calls
        assert (record.tool_name, record.status) == ("post_payment", "finished")
        assert snap.turns[0].final_text == "done: paid 5 to a"
        # Retried on the new worker under the same call ID ...
        attempts = rig.ledger.entries("payment_attempt")
        assert [a["attempt"] for a in attempts] == [1, 2]
        (call_id,) = {str(a["call_id"]) for a in attempts}
        assert call_id.startswith("dexcall_")
        # ... so the provider, which deduplicates by call ID, applied it once.
        (payment,) = rig.ledger.entries("payment")
        assert payment["call_id"] == call_id


async def test_sigkill_during_a_retry_unsafe_mutation_records_outcome_unknown(
    engine: EmbeddedEngine, client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_worker(engine, client, flow_type, tmp_path) as rig:
        sid = "kill-mid-wire"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call wire_funds {"account": "a", '
            '"amount": 5, "gate": "wire"}',
        )
        await rig.approve(sid)
        await rig.reached("wire")
        rig.worker.kill()
        # A rerun would pass the gate and wire: it must not happen.
        rig.open_gate("wire")
        rig.worker.start()
        snap = await rig.idle(sid)
        (record,) = snap.turns[0].tool_calls
        assert (record.tool_name, record.status) == ("wire_funds", "outcome_unknown")
        assert "The outcome of wire_funds is unknown" in snap.turns[0].final_text
        # At most one invocation reached the provider.
        assert [a["attempt"] for a in rig.ledger.entries("wire_started")] == [1]
        assert rig.ledger.entries("wire") == []

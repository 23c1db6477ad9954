"""A session whose worker and clients share a PostgreSQL runtime store, across a worker kill."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from dex_agents.cli._app import main
from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing import Ledger, WorkerProcess
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow
from dex_agents.testing._postgres_server import PostgresTestServer
from dex_agents.testing._worker_process import WorkerProcessConfig


async def _cli(*args: str) -> tuple[int, str]:
    result = await asyncio.to_thread(CliRunner().invoke, main, list(args))
    return result.exit_code, result.output


@pytest.mark.timeout(180)
async def test_an_approval_survives_a_worker_kill_with_the_store_in_postgres(
    engine: EmbeddedEngine,
    postgres_server: PostgresTestServer,
    tmp_path: Path,
    flow_type: str,
) -> None:
    dsn = postgres_server.create_database(f"db_{uuid.uuid4().hex[:10]}")
    (tmp_path / "gates").mkdir()
    config = LedgerFlowConfig(
        flow_type=flow_type,
        ledger_path=str(tmp_path / "ledger.jsonl"),
        gate_dir=str(tmp_path / "gates"),
    )
    ledger = Ledger(config.ledger_path)
    client = await engine.client()
    # The client side is another "machine": its own store object on the same database.
    store = PostgresRuntimeStore(dsn)
    sessions = SessionClient(client, ledger_flow(config), store)
    worker = WorkerProcess(
        WorkerProcessConfig(
            address=engine.address,
            namespace=engine.namespace,
            store_path=dsn,
            flow=config,
        ),
        tmp_path,
    )
    try:
        with worker:
            sid = "pg-refund"
            await sessions.start(
                sid, initial_message='call create_refund {"orderId": "7"}'
            )
            (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
            worker.kill()

            # No worker: the snapshot and the command line read the shared store.
            projected = await sessions.snapshot(sid)
            assert projected.updated_at, "the store's projection, not a query"
            assert [i.interrupt_id for i in projected.pending_interrupts] == [
                interrupt.interrupt_id
            ]
            code, out = await _cli("sessions", "--json", "--store", dsn)
            assert code == 0, out
            (listed,) = json.loads(out)
            assert (listed["session_id"], listed["status"]) == (
                sid,
                "waiting_for_approval",
            )
            assert ledger.count("create_refund") == 0

            worker.start()
            assert await sessions.resolve_interrupt(
                sid, interrupt.interrupt_id, approved=True
            )
            snap = await sessions.wait_for_idle(sid)
            assert snap.turns[0].final_text == "done: create_refund=refunded order 7"
            assert ledger.count("create_refund") == 1
            code, out = await _cli("events", sid, "--json", "--store", dsn)
            assert code == 0, out
            types = [json.loads(line)["type"] for line in out.splitlines()]
            assert "tool_call_finished" in types
    finally:
        await store.close()


async def test_the_command_line_says_when_the_database_is_unreachable(
    postgres_server: PostgresTestServer,
) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{postgres_server.port}/missing_db"
    code, out = await _cli("sessions", "--store", dsn)
    assert code == 1
    assert "error: cannot connect to the PostgreSQL runtime store" in out
    assert "missing_db" in out
    assert "Traceback" not in out

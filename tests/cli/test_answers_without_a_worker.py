"""`approve` and `reject` with no worker running: recorded now, applied once when one starts."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import invoke
from support.session_harness import ledger_config

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_approve_with_no_worker_is_recorded_and_the_write_runs_once(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:

    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    store_path = tmp_path / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(store_path)
    sessions = SessionClient(client, flow, store)
    target = ["--state-dir", str(engine.state_dir), "--store", str(store_path)]
    sid = f"answer-later-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "3"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
    iid = interrupt.interrupt_id

    # The worker just stopped (Temporal still lists it): the answer waits its
    # timeout, then is recorded.
    result = await invoke("approve", sid, iid, "--timeout", "1", *target)
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith(f"recorded: the approval of {iid} (session {sid})")
    assert f"No worker serves flow '{flow_type}' now; it applies when one starts" in (
        result.stdout
    )
    assert "`dex-agents worker --agent module:flow --state-dir" in result.stdout
    assert "if the session has" not in result.stdout  # the store knows the interrupt
    assert "Traceback" not in result.output and "error" not in result.stderr
    # Said twice, it is recorded once, and applies once.
    again = await invoke("approve", sid, iid, "--timeout", "0.5", *target)
    assert again.exit_code == 3, again.output
    # The other way, it would change nothing: it is refused (exit code 4).
    other = await invoke("reject", sid, iid, "--timeout", "0.5", *target)
    assert other.exit_code == 4, other.output
    assert f"an approval of {iid} (session {sid!r}) is already recorded" in (
        other.stderr
    )
    assert "this reject was not recorded" in other.stderr
    assert ledger.count("create_refund_started") == 0

    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert snap.turns[-1].final_text == "done: create_refund=refunded order 3"
        # Now a worker answers: the approval is done, and a rejection is too late.
        late = await invoke("reject", sid, iid, *target)
        assert late.exit_code == 4, late.output
        assert f"{iid} of session {sid!r} was already approved" in late.stderr
    assert ledger.count("create_refund_started") == 1
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["3"]
    await store.close()


async def test_an_edit_with_no_worker_is_not_recorded_and_never_applies(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    store_path = tmp_path / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(store_path)
    sessions = SessionClient(client, flow, store)
    target = ["--state-dir", str(engine.state_dir), "--store", str(store_path)]
    sid = f"edit-later-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "3"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
    iid = interrupt.interrupt_id

    edit = '{"orderId": "4"}'
    result = await invoke(
        "approve", sid, iid, "--edit", edit, "--timeout", "1", *target
    )
    assert result.exit_code == 1, result.output
    assert "nothing was recorded, and it will not apply later" in result.stderr
    # The command to start a worker reaches this state directory when pasted.
    assert f"worker --agent module:flow --state-dir {engine.state_dir}" in (
        result.stderr
    )
    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert [i.interrupt_id for i in snap.pending_interrupts] == [iid]
    assert ledger.count("create_refund_started") == 0
    await store.close()

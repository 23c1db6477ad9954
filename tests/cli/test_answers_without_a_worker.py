"""`approve` and `reject` with no worker running: recorded now, applied once when one starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.temporal import EmbeddedEngine, create_worker
from support.cli_harness import invoke
from support.session_harness import approval_without_worker

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_approve_with_no_worker_is_recorded_and_the_write_runs_once(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow, store, sessions, ledger, sid, iid = await approval_without_worker(
        client, tmp_path, flow_type, "answer-later", order_id="3"
    )
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]

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
    assert f"{iid} (session {sid!r}) already has an approval recorded" in (other.stderr)
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
    flow, store, sessions, ledger, sid, iid = await approval_without_worker(
        client, tmp_path, flow_type, "edit-later", order_id="3"
    )
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]

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

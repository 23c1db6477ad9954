"""`approvals` and `show` after an answer no worker took: answered, recorded, pending a worker.

With no worker running, `approve` and `reject` record the answer in the
session's history (exit code 3) and it applies when a worker starts. Until
then the approval is still waiting, but the commands that list it say how it
was answered, and no longer offer to answer it, so nobody answers it again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import Result
from temporalio.client import Client

from dex_agents.temporal import EmbeddedEngine, create_worker
from dex_agents.temporal._models import ResolveInterruptInput
from dex_agents.temporal._snapshot import AgentSnapshot
from dex_agents.temporal._workflow import RECORD_RESOLUTION
from support.cli_harness import invoke
from support.session_harness import (
    approval_without_worker,
    budget_paused_without_worker,
)

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

APPLIES = "(recorded; applies when a worker starts)"


def _row(listed: Result, sid: str) -> str:
    """The `approvals` row of session `sid`, its cells one space apart."""
    assert listed.exit_code == 0, listed.output
    header = listed.stdout.splitlines()[0]
    assert header.split() == [
        "SESSION", "INTERRUPT", "TOOL", "EFFECT", "INPUT", "DEADLINE", "WAITING",
        "ANSWER",
    ]  # fmt: skip
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(sid)]
    return " ".join(row.split())


def _lines(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result.stdout.splitlines()


async def test_a_recorded_approval_shows_as_approved_until_a_worker_applies_it(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow, store, sessions, ledger, sid, iid = await approval_without_worker(
        client, tmp_path, flow_type, "shown-later", order_id="5"
    )
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
    worker = f"dex-agents worker --agent module:flow {' '.join(target)}"

    result = await invoke("approve", sid, iid, "--as", "ana", "--timeout", "1", *target)
    assert result.exit_code == 3, result.output

    # Still listed (it has not applied), with its answer, and not offered to answer.
    listed = await invoke("approvals", *target)
    assert re.fullmatch(
        re.escape(
            f'{sid} {iid} create_refund non idempotent write {{"orderId": "5"}} -'
        )
        + r" \d+s "
        + re.escape("approved by ana (recorded)"),
        _row(listed, sid),
    ), _row(listed, sid)
    assert "answer one:" not in listed.stdout
    assert _lines(listed)[-1] == (
        "recorded: answered while no worker ran, not applied yet; each applies when "
        f"a worker of its session's flow starts: {worker}"
    )
    (row,) = json.loads((await invoke("approvals", "--json", *target)).stdout)
    assert (row["interrupt_id"], row["recorded"]) == (
        iid,
        {
            "approved": True,
            "rejection_message": None,
            "new_spend_limit": None,
            "resolved_by": "ana",
        },
    )

    shown = await invoke("show", sid, *target)
    lines = _lines(shown)
    assert f"(no worker serves flow {flow_type!r}: the store's last projection)" in (
        lines
    )
    card = lines[lines.index(f"⏸ approval needed {iid}") :]
    assert card[1] == f"  answer  approved by ana {APPLIES}"
    assert card[2:4] == [
        "  tool    create_refund",
        "  effect  non-idempotent write: runs at most once, never retried",
    ]
    assert card[-2:] == [
        '  input   {"orderId": "5"}',
        f"  apply it: {worker}   (start a worker of the session's flow)",
    ]
    assert "dex-agents approve" not in shown.stdout
    assert "dex-agents reject" not in shown.stdout
    (pending,) = json.loads((await invoke("show", sid, "--json", *target)).stdout)[
        "pending_interrupts"
    ]
    assert pending["recorded"] == row["recorded"]
    assert ledger.count("create_refund_started") == 0

    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert snap.turns[-1].final_text == "done: create_refund=refunded order 5"
        assert snap.pending_interrupts == []
        listed = await invoke("approvals", *target)
        assert _lines(listed) == [f"no approvals waiting in {store.path}"]
        live = await invoke("show", sid, *target)
        assert "answer  " not in live.stdout and APPLIES not in live.stdout
    assert ledger.count("create_refund_started") == 1
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["5"]
    await store.close()


async def test_a_recorded_rejection_shows_as_rejected_and_the_write_never_runs(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow, store, sessions, ledger, sid, iid = await approval_without_worker(
        client, tmp_path, flow_type, "shown-rejected", order_id="6"
    )
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
    result = await invoke(
        "reject", sid, iid, "--as", "ana", "-m", "wrong order", "--timeout", "1",
        *target,
    )  # fmt: skip
    assert result.exit_code == 3, result.output

    listed = await invoke("approvals", *target)
    assert re.fullmatch(
        re.escape(
            f'{sid} {iid} create_refund non idempotent write {{"orderId": "6"}} -'
        )
        + r" \d+s "
        + re.escape("rejected by ana (recorded): wrong order"),
        _row(listed, sid),
    ), _row(listed, sid)
    (row,) = json.loads((await invoke("approvals", "--json", *target)).stdout)
    assert row["recorded"] == {
        "approved": False,
        "rejection_message": "wrong order",
        "new_spend_limit": None,
        "resolved_by": "ana",
    }
    shown = _lines(await invoke("show", sid, *target))
    assert f"  answer  rejected by ana {APPLIES}: wrong order" in shown

    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert snap.pending_interrupts == []
        assert [r.status for r in snap.turns[-1].tool_calls] == ["rejected"]
        listed = await invoke("approvals", *target)
        assert _lines(listed) == [f"no approvals waiting in {store.path}"]
    assert ledger.count("create_refund_started") == 0
    await store.close()


async def test_a_recorded_spend_limit_shows_with_its_new_limit(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    paused = await budget_paused_without_worker(
        client, tmp_path, flow_type, "limit-shown"
    )
    flow, store, sessions = paused.flow, paused.store, paused.sessions
    sid, iid, store_path = paused.sid, paused.interrupt_id, paused.store.path
    target = ["--state-dir", str(engine.state_dir), "--store", str(store_path)]

    result = await invoke(
        "approve", sid, iid, "--spend-limit", "0.01", "--as", "ana", "--timeout",
        "1", *target,
    )  # fmt: skip
    assert result.exit_code == 3, result.output

    answer = "approved by ana with a new spend limit of 0.0100 USD"
    listed = await invoke("approvals", *target)
    assert re.fullmatch(
        re.escape(
            f"{sid} {iid} spend_limit budget spend limit reached: 0.0020 of 0.0015 "
            "USD spent -"
        )
        + r" \d+s "
        + re.escape(f"{answer} (recorded)"),
        _row(listed, sid),
    ), _row(listed, sid)
    (row,) = json.loads((await invoke("approvals", "--json", *target)).stdout)
    assert row["recorded"] == {
        "approved": True,
        "rejection_message": None,
        "new_spend_limit": 0.01,
        "resolved_by": "ana",
    }
    shown = _lines(await invoke("show", sid, *target))
    card = shown[shown.index(f"⏸ spend limit reached {iid}") :]
    assert card[1:3] == [
        f"  answer  {answer} {APPLIES}",
        "  budget  spend limit reached: 0.0020 of 0.0015 USD spent",
    ]

    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert (snap.turns[-1].status, snap.turns[-1].final_text) == (
            "completed",
            "said: three",
        )
        listed = await invoke("approvals", *target)
        assert _lines(listed) == [f"no approvals waiting in {store_path}"]
    await store.close()


async def test_a_recorded_answer_the_worker_refused_is_offered_again(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    # An approval of a spend limit with no new limit, recorded as a bare
    # Signal (the CLI and `SessionClient` refuse it first, when the store has
    # the session's projection): the worker that takes it changes nothing, so
    # the approval is no longer shown answered.
    paused = await budget_paused_without_worker(
        client, tmp_path, flow_type, "limit-refused"
    )
    flow, store, sessions = paused.flow, paused.store, paused.sessions
    sid, iid = paused.sid, paused.interrupt_id
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
    await client.get_workflow_handle(sid).signal(
        RECORD_RESOLUTION, ResolveInterruptInput(interrupt_id=iid, approved=True)
    )
    assert _row(await invoke("approvals", *target), sid).endswith("approved (recorded)")

    async with create_worker(client, [flow], store=store):
        # An Update is taken after the Signal recorded before it: once it
        # returns, the worker has taken the recorded answer too.
        handle = client.get_workflow_handle(sid)
        await handle.execute_update("idle_snapshot", result_type=AgentSnapshot)
        assert (await sessions.snapshot(sid)).status == "budget_reached"
        listed = _lines(await invoke("approvals", *target))
        assert "ANSWER" not in listed[0]
        assert f"approve {sid} {iid} --spend-limit USD" in "\n".join(listed)
    await store.close()

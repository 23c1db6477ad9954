"""`dex-agents end`: a session ends, `sessions` shows it ended, its history stays readable."""

from __future__ import annotations

import json

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from support.cli_harness import Served, assert_one_line_error

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_end_ends_an_idle_session_and_sessions_shows_it_ended(
    served: Served, client: Client
) -> None:
    sid = served.session_id()
    other = served.session_id()
    for session_id in (sid, other):
        await served.sessions.start(session_id, initial_message="say hi")
        await served.sessions.wait_for_idle(session_id)

    result = await served.run("end", sid, "--reason", "demo over")

    assert result.exit_code == 0, result.output
    assert f"ended session {sid}" in result.stdout
    assert f"dex-agents show {sid}" in result.stdout
    description = await client.get_workflow_handle(sid).describe()
    assert description.status == WorkflowExecutionStatus.COMPLETED

    listed = await served.run("sessions")
    assert listed.exit_code == 0, listed.output
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert "ended" in rows[sid].split()
    assert "idle" in rows[other].split()
    as_json = json.loads((await served.run("sessions", "--json")).stdout)
    assert {s["session_id"]: s["status"] for s in as_json} == {
        sid: "ended",
        other: "idle",
    }

    shown = await served.run("show", sid)
    assert shown.exit_code == 0, shown.output
    assert "ended" in shown.stdout
    assert "agent › said: hi" in shown.stdout
    events = await served.run("events", sid)
    assert events.exit_code == 0, events.output
    assert "session_ended" in events.stdout.splitlines()[-1]
    assert "demo over" in events.stdout.splitlines()[-1]

    again = await served.run("end", sid)
    assert again.exit_code == 0, again.output
    assert "already ended" in again.stdout
    refused = await served.run("approve", sid, "intr_x")
    assert_one_line_error(refused, "has ended")


async def test_end_refuses_work_in_progress_unless_forced(served: Served) -> None:
    sid = served.session_id()
    await served.sessions.start(
        sid, initial_message='call create_refund {"orderId": "7"}'
    )
    (interrupt,) = (await served.sessions.wait_for_idle(sid)).pending_interrupts

    refused = await served.run("end", sid)

    assert_one_line_error(refused, "waiting for approval", "`--force`")
    assert "force=True" not in refused.stderr
    assert (await served.sessions.snapshot(sid)).status == "waiting_for_approval"

    forced = await served.run("end", sid, "--force", "--reason", "customer left")

    assert forced.exit_code == 0, forced.output
    assert f"ended session {sid}" in forced.stdout
    assert (
        f"rejected the pending approval {interrupt.interrupt_id} (create_refund)"
        in forced.stdout
    )
    snap = await served.sessions.snapshot(sid)
    assert snap.status == "ended"
    assert snap.turns[-1].tool_calls[0].rejection_message == (
        "the session ended: customer left"
    )
    assert served.ledger.count("create_refund_started") == 0


async def test_end_of_an_unknown_session_is_a_one_line_error(served: Served) -> None:
    result = await served.run("end", served.session_id())
    assert_one_line_error(result, "unknown session", "dex-agents sessions")

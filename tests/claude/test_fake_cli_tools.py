"""Tool calls through the fake CLI on the dev server: retries, Bash, application hooks.

What runs is what was approved: these tests count the tools' runs in the ledger
and Bash's runs in the session's `bash.log`, and check each ran with the input
the session recorded, also when an application hook rewrote it or the CLI
resumed the call without hooks.
"""

from __future__ import annotations

from dex_agents import AgentSessionOptions, ToolPolicy
from dex_agents.claude._runner import APPROVED_CLI_TOOL_OUTPUT
from dex_agents.cli._views import turn_calls
from support.claude_steps import (
    call_events,
    script_call,
    start_idle,
    start_to_interrupt,
)
from support.custom_tools_agent import audit_rig
from support.fake_suite_agent import DENY_MARKER
from support.fake_suite_rig import SuiteEnv, in_process


async def test_an_idempotent_write_retries_under_one_key(suite: SuiteEnv) -> None:
    async with in_process(suite) as rig:
        sid = "email-retries"
        message = script_call("send_email", to="a@example.com", fail_attempts=2)
        snap = await start_idle(rig.sessions, sid, message)
        (record,) = snap.turns[0].tool_calls
        assert (record.status, record.output) == ("finished", "sent to a@example.com")
        assert snap.turns[0].final_text == "done: sent to a@example.com"
        key = f"{sid}/turn-1/{record.tool_call_id}"
        attempts = rig.ledger.entries("send_email_attempt")
        assert [(e["attempt"], e["key"]) for e in attempts] == [
            (1, key),
            (2, key),
            (3, key),
        ]
        assert rig.ledger.count("send_email") == 1


async def test_an_idempotent_write_whose_attempts_run_out_is_outcome_unknown(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "email-gives-up"
        message = script_call("send_email", to="a@example.com", fail_attempts=9)
        snap = await start_idle(rig.sessions, sid, message)
        (record,) = snap.turns[0].tool_calls
        assert record.status == "outcome_unknown"
        assert "The outcome of send_email is unknown" in snap.turns[0].final_text
        # The model reads what the last attempt raised, not only that it failed.
        assert record.output and f"(last error: {record.output}" in (
            snap.turns[0].final_text
        )
        assert rig.ledger.count("send_email_attempt") == 3
        assert rig.ledger.count("send_email") == 0


async def test_approved_bash_runs_once_in_the_resumed_segment(suite: SuiteEnv) -> None:
    async with in_process(suite) as rig:
        sid = "bash-approved"
        message = script_call("Bash", command="echo approved >> bash.log; echo ran")
        interrupt = await start_to_interrupt(rig, sid, message)
        assert (interrupt.tool_name, interrupt.effect) == ("Bash", "unclassified")
        assert rig.bash_log(sid) == []
        snap = await rig.resolve(sid)
        (record,) = snap.turns[0].tool_calls
        # The turn log has what the command printed, not the Step's placeholder.
        assert (record.status, record.output) == ("finished", "ran")
        assert snap.turns[0].final_text == "done: ran"
        assert rig.bash_log(sid) == ["approved"]
        # `show` prints what the command printed, from the resumed segment's event.
        assert rig.sessions.store is not None
        calls = await turn_calls(rig.sessions.store, sid, snap.turns)
        (shown,) = calls["turn-1"]
        assert (shown.record.tool_name, shown.record.output) == ("Bash", "ran")


async def test_rejected_bash_never_runs_and_the_model_reads_the_rejection(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "bash-rejected"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call Bash {"command": "echo no >> bash.log"}',
        )
        snap = await rig.resolve(sid, approved=False, message="no shell today")
        assert [r.status for r in snap.turns[0].tool_calls] == ["rejected"]
        # can_use_tool's denial reaches the model without a hook-error prefix.
        assert snap.turns[0].final_text == (
            "done: The user rejected this call: no shell today"
        )
        assert rig.bash_log(sid) == []


async def test_an_input_rewriting_application_hook_decides_what_is_approved_and_run(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite, hooks=("rewrite_refund",)) as rig:
        sid = "rewrite-refund"
        message = script_call("create_refund", orderId="7")
        interrupt = await start_to_interrupt(rig, sid, message)
        assert interrupt.arguments == {"orderId": "7-checked"}
        snap = await rig.resolve(sid)
        assert snap.turns[0].final_text == "done: refunded order 7-checked"
        assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == [
            "7-checked"
        ]
        # The resumed call did not pass through the application's hook again.
        assert len(rig.app_hook_calls(interrupt.tool_call_id)) == 1


async def test_a_rewritten_input_that_fails_the_schema_never_reaches_the_tool(
    suite: SuiteEnv,
) -> None:
    # The input the application's hook rewrote fails the tool's schema: it is
    # refused before any approval, and the model reads why in the same segment.
    async with in_process(suite, hooks=("break_refund_schema",)) as rig:
        sid = "rewrite-breaks-schema"
        message = script_call("create_refund", orderId="7")
        snap = await start_idle(rig.sessions, sid, message)
        assert snap.pending_interrupts == [] and snap.turns[0].tool_calls == []
        problem = "Input validation error: 7 is not of type 'string'"
        assert snap.turns[0].final_text == f"done: create_refund did not run: {problem}"
        assert rig.ledger.count("create_refund_started") == 0


async def test_a_resumed_call_is_answered_through_can_use_tool_when_hooks_are_skipped(
    suite: SuiteEnv,
) -> None:
    async with in_process(
        suite, resume_without_hooks=True, hooks=("rewrite_bash",)
    ) as rig:
        sid = "resume-without-hooks"
        await rig.sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        snap = await rig.resolve(sid)
        assert snap.turns[0].final_text == "done: refunded order 7"
        assert rig.ledger.count("create_refund") == 1
        # A CLI tool resumes with its approved input, not the input the CLI
        # asks about (the model's, from before the application's rewrite).
        await rig.sessions.send_user_message(
            sid, 'dex-script: call Bash {"command": "echo original >> bash.log"}'
        )
        interrupt = await rig.interrupt(sid)
        assert interrupt.arguments == {"command": "echo rewritten-1 >> bash.log"}
        snap = await rig.resolve(sid)
        assert snap.turns[1].status == "completed"
        assert rig.bash_log(sid) == ["rewritten-1"]
        assert len(rig.app_hook_calls(interrupt.tool_call_id)) == 1


async def test_an_application_hook_that_denies_a_resumed_call_cannot_hide_its_record(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite, hooks=("deny_marked_refunds",)) as rig:
        sid = "app-hook-denies-resumed"
        message = script_call("create_refund", orderId="7")
        interrupt = await start_to_interrupt(rig, sid, message)
        # From now on the application denies refunds; this one is approved.
        (rig.cwd(sid) / DENY_MARKER).touch()
        snap = await rig.resolve(sid)
        assert snap.turns[0].final_text == "done: refunded order 7"
        assert rig.ledger.count("create_refund") == 1
        assert len(rig.app_hook_calls(interrupt.tool_call_id)) == 1
        # A new refund is the application's to deny.
        await rig.sessions.send_user_message(
            sid, 'dex-script: call create_refund {"orderId": "8"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.pending_interrupts == []
        assert snap.turns[1].final_text == (
            "done: PreToolUse:mcp__tools__create_refund hook error: refunds are frozen"
        )
        assert rig.ledger.count("create_refund_started") == 1


async def test_bash_an_application_hook_rewrote_resumes_with_the_approved_input(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite, hooks=("rewrite_bash",)) as rig:
        sid = "rewritten-bash"
        message = script_call("Bash", command="echo original >> bash.log")
        interrupt = await start_to_interrupt(rig, sid, message)
        assert interrupt.arguments == {"command": "echo rewritten-1 >> bash.log"}
        snap = await rig.resolve(sid)
        assert snap.turns[0].status == "completed"
        # The hook numbers its rewrites: a second pass would have said 2.
        assert rig.bash_log(sid) == ["rewritten-1"]
        assert len(rig.app_hook_calls(interrupt.tool_call_id)) == 1


async def test_rows133_144_a_resumed_cli_call_has_exactly_one_finished_event(
    suite: SuiteEnv,
) -> None:
    """Rows 133/144: an approved Bash call's tool Step writes no finished event
    (its outcome says `finished_by_resumed_turn`); the resumed segment's CLI
    result writes the call's one `tool_call_finished`, status finished."""
    async with in_process(suite) as rig:
        sid = "audit-bash-one-finished-event"
        message = script_call(
            "Bash", command="echo audited >> bash.log; echo audited-ran"
        )
        interrupt = await start_to_interrupt(rig, sid, message)
        assert interrupt.tool_name == "Bash"
        snap = await rig.resolve(sid)
        (record,) = snap.turns[0].tool_calls
        assert (record.status, record.output) == ("finished", "audited-ran")
        assert record.finished_by_resumed_turn
        assert snap.turns[0].final_text == "done: audited-ran"
        assert rig.bash_log(sid) == ["audited"]

        events = await rig.sessions.events(sid)
        finished = call_events(events, "tool_call_finished", interrupt.tool_call_id)
        assert len(finished) == 1, finished
        (event,) = finished
        assert event.data["status"] == "finished"
        # It came from the resumed segment, not from the tool Step.
        assert "/run_model/" in event.step_execution_id, event
        assert event.data["output"] != APPROVED_CLI_TOOL_OUTPUT
        # The tool Step did run (and said so when it started).
        step_started = [
            e
            for e in call_events(events, "tool_call_started", interrupt.tool_call_id)
            if "/run_model/" not in e.step_execution_id
        ]
        assert len(step_started) == 1, step_started


def test_row69_unclassified_runs_in_the_single_attempt_step() -> None:
    """Row 69: unclassified behaves as non_idempotent_write: approval, one attempt."""
    unclassified = ToolPolicy(effect="unclassified")
    assert unclassified.step == "call_single_attempt_tool"
    assert unclassified.step == ToolPolicy(effect="non_idempotent_write").step
    assert unclassified.needs_approval
    assert AgentSessionOptions().default_tool_effect == "unclassified"


async def test_row69_a_tool_without_policy_runs_once_after_approval_under_the_defaults(
    suite: SuiteEnv,
) -> None:
    """Row 69: a custom tool with no policy and no annotations, under the real
    `AgentSessionOptions()`, waits for approval as unclassified and runs in a
    single-attempt Step: a throwing handler is outcome_unknown after 1 attempt."""
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(),
    ) as rig:
        sid = "audit-unclassified-single-attempt"
        message = script_call("audit_charge", amount=5)
        snap = await start_idle(rig.sessions, sid, message)
        assert snap.status == "waiting_for_approval"
        (interrupt,) = snap.pending_interrupts
        assert (interrupt.tool_name, interrupt.effect) == (
            "audit_charge",
            "unclassified",
        )
        assert rig.ledger.count("audit_charge_attempt") == 0
        assert await rig.sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await rig.sessions.wait_for_idle(sid)
        (record,) = snap.turns[0].tool_calls
        assert (record.tool_name, record.status, record.attempts) == (
            "audit_charge",
            "outcome_unknown",
            1,
        )
        assert rig.ledger.count("audit_charge_attempt") == 1
        assert "The outcome of audit_charge is unknown" in snap.turns[0].final_text
        events = await rig.sessions.events(sid)
        steps = {
            e.step_execution_id
            for e in call_events(events, "tool_call_started", interrupt.tool_call_id)
        }
        assert steps == {f"turn-1/call_single_attempt_tool/{interrupt.tool_call_id}"}

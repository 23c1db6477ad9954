"""Engine rows of docs/spec-coverage.md that an audit found without a proving test.

Each test runs a Claude agent on the fake CLI, served by a worker in the test
process, on the shared dev server. Row ids are in each docstring.
"""

from __future__ import annotations

from support.audit_engine_support import audit_rig
from support.fake_suite_rig import SuiteEnv, in_process

from support.cli_argv_recorder import recorded_runs, recording_cli
from dex_agents import AgentSessionOptions, ToolPolicy
from dex_agents.claude._runner import APPROVED_CLI_TOOL_OUTPUT
from dex_agents.temporal import AgentSnapshot, SessionClient

# --- rows 133 and 144 ---------------------------------------------------------


async def test_rows133_144_a_resumed_cli_call_has_exactly_one_finished_event(
    suite: SuiteEnv,
) -> None:
    """Rows 133/144: an approved Bash call's tool Step writes no finished event
    (its outcome says `finished_by_resumed_turn`); the resumed segment's CLI
    result writes the call's one `tool_call_finished`, status finished."""
    async with in_process(suite) as rig:
        sid = "audit-bash-one-finished-event"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call Bash {"command": '
            '"echo audited >> bash.log; echo audited-ran"}',
        )
        interrupt = await rig.interrupt(sid)
        assert interrupt.tool_name == "Bash"
        snap = await rig.resolve(sid)
        (record,) = snap.turns[0].tool_calls
        assert (record.status, record.output) == ("finished", APPROVED_CLI_TOOL_OUTPUT)
        assert record.finished_by_resumed_turn
        assert snap.turns[0].final_text == "done: audited-ran"
        assert rig.bash_log(sid) == ["audited"]

        events = await rig.sessions.events(sid)
        finished = [
            e
            for e in events
            if e.type == "tool_call_finished"
            and e.data.get("tool_call_id") == interrupt.tool_call_id
        ]
        assert len(finished) == 1, finished
        (event,) = finished
        assert event.data["status"] == "finished"
        # It came from the resumed segment, not from the tool Step.
        assert "/run_model/" in event.step_execution_id, event
        assert event.data["output"] != APPROVED_CLI_TOOL_OUTPUT
        # The tool Step did run (and said so when it started).
        step_started = [
            e
            for e in events
            if e.type == "tool_call_started"
            and e.data.get("tool_call_id") == interrupt.tool_call_id
            and "/run_model/" not in e.step_execution_id
        ]
        assert len(step_started) == 1, step_started


# --- row 69 -------------------------------------------------------------------


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
        await rig.sessions.start(
            sid, initial_message='dex-script: call audit_charge {"amount": 5}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
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
            for e in events
            if e.type == "tool_call_started"
            and e.data.get("tool_call_id") == interrupt.tool_call_id
        }
        assert steps == {f"turn-1/call_single_attempt_tool/{interrupt.tool_call_id}"}


# --- row 146 ------------------------------------------------------------------


async def test_row146_the_spend_limit_stops_a_turn_before_its_resumed_segment(
    suite: SuiteEnv,
) -> None:
    """Row 146: the limit is checked before every segment: the deferring segment
    alone goes over it, so after the approved call the resumed segment never runs
    and the turn fails (the first segment itself overshot; usage arrives at its end)."""
    script, log = recording_cli(suite.tmp_path)
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(spend_limit=0.000001),
        cli_path=script,
    ) as rig:
        sid = "audit-spend-limit-per-segment"
        await rig.sessions.start(
            sid, initial_message='dex-script: call audit_refund {"orderId": "9"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.status == "waiting_for_approval"
        # One segment ran and went over the limit; the turn goes on to its call.
        assert snap.usage.cost_usd > 0.000001
        assert snap.usage.model_calls == 1
        assert len(recorded_runs(log)) == 1
        (interrupt,) = snap.pending_interrupts
        assert await rig.sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await rig.sessions.wait_for_idle(sid)
        # The resumed segment would start over the limit: the session asks first.
        assert snap.status == "budget_reached"
        (budget,) = snap.pending_interrupts
        assert await rig.sessions.resolve_interrupt(
            sid, budget.interrupt_id, approved=False
        )
        snap = await rig.sessions.wait_for_idle(sid)
        turn = snap.turns[0]
        assert turn.status == "failed"
        assert "spend limit reached" in (turn.error or "")
        # The approved call ran in its Step; the resumed segment never started.
        assert [(r.tool_name, r.status) for r in turn.tool_calls] == [
            ("audit_refund", "finished")
        ]
        assert rig.ledger.count("audit_refund") == 1
        assert len(recorded_runs(log)) == 1
        assert snap.usage.model_calls == 1
        assert turn.final_text == ""
        events = await rig.sessions.events(sid)
        assert not [e for e in events if e.step_execution_id == "turn-1/run_model/2"]


# --- new: custom_tool_server_name ---------------------------------------------


async def test_a_renamed_custom_tool_server_serves_prefixed_names_but_keeps_bare_ones(
    suite: SuiteEnv,
) -> None:
    """`custom_tool_server_name="audit_srv"`: the CLI calls `mcp__audit_srv__<tool>`,
    while the policies (by bare name), interrupts, records and events name the
    tools bare."""
    script, log = recording_cli(suite.tmp_path)
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(),
        server_name="audit_srv",
        cli_path=script,
    ) as rig:
        sid = "audit-renamed-server"
        await rig.sessions.start(
            sid,
            initial_message="dex-script: call mcp__audit_srv__audit_lookup "
            '{"orderId": "3"}',
        )
        snap = await rig.sessions.wait_for_idle(sid)
        # The bare-name read policy let it run inline, with no record.
        assert snap.turns[0].status == "completed"
        assert snap.turns[0].final_text == "done: order 3: arrived broken"
        assert snap.turns[0].tool_calls == []
        assert rig.ledger.count("audit_lookup") == 1

        await rig.sessions.send_user_message(
            sid, 'dex-script: call mcp__audit_srv__audit_refund {"orderId": "4"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        (interrupt,) = snap.pending_interrupts
        # The bare-name write policy applies (unclassified would be the default).
        assert (interrupt.tool_name, interrupt.effect) == (
            "audit_refund",
            "non_idempotent_write",
        )
        snap = await _approve(rig.sessions, sid, interrupt.interrupt_id)
        assert snap.turns[1].final_text == "done: refunded order 4"
        (record,) = snap.turns[1].tool_calls
        assert (record.tool_name, record.status) == ("audit_refund", "finished")
        assert rig.ledger.count("audit_refund") == 1

        events = await rig.sessions.events(sid)
        started = [e.data["tool_name"] for e in events if e.type == "tool_call_started"]
        assert set(started) == {"audit_lookup", "audit_refund"}, started
        # The CLI got the server under its name.
        configs = [
            argv[argv.index("--mcp-config") + 1]
            for argv in recorded_runs(log)
            if "--mcp-config" in argv
        ]
        assert configs and all('"audit_srv"' in c for c in configs), configs
        assert not any('"tools"' in c for c in configs), configs


async def test_a_renamed_server_prefix_in_allowed_tools_is_refused_for_a_deferring_tool(
    suite: SuiteEnv,
) -> None:
    """An `allowed_tools` entry `mcp__audit_srv__audit_refund` (a write by its
    bare-name policy) fails the turn with an error naming the option; nothing runs.

    The session's default effect is read, so only resolving the renamed prefix to
    the custom tool (and its policy) refuses the entry: a check that missed the
    prefix would resolve the name as an unknown tool, a read, and let it pass.
    """
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(default_tool_effect="read"),
        server_name="audit_srv",
        allowed_tools=["mcp__audit_srv__audit_refund"],
    ) as rig:
        sid = "audit-renamed-server-allowed-tools"
        await rig.sessions.start(
            sid, initial_message='dex-script: call audit_refund {"orderId": "5"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        turn = snap.turns[0]
        assert turn.status == "failed"
        assert "`allowed_tools` lists 'mcp__audit_srv__audit_refund'" in (
            turn.error or ""
        )
        assert snap.pending_interrupts == []
        assert rig.ledger.count("audit_refund") == 0


async def _approve(
    sessions: SessionClient, sid: str, interrupt_id: str
) -> AgentSnapshot:
    assert await sessions.resolve_interrupt(sid, interrupt_id, approved=True)
    return await sessions.wait_for_idle(sid)

"""Turns of the Claude agent through the fake CLI on the dev server: answers, approvals, failures.

Each test runs the suite's agent (`fake_suite_agent`) with the fake CLI as its
`cli_path` and a worker in the test process, and counts what the tools did in
the ledger: a write that must run once is counted, never inferred from text.
"""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, tool

from dex_agents.claude import ClaudeAgentDefinition
from dex_agents.temporal._snapshot import AgentSnapshot
from support.claude_steps import script_call, start_idle, start_to_interrupt
from support.fake_suite_agent import build_tools
from support.fake_suite_rig import SuiteEnv, in_process

REFUSAL = "did not run: only one call that needs its own step can run per reply"


def cli_prompts(snapshot: AgentSnapshot) -> list[list[str]]:
    """The text blocks of every prompt the CLI received, from its stored transcript."""
    prompts: list[list[str]] = []
    for message in snapshot.messages:
        entries: Any = message.item.get("entries") or []
        for entry in entries:
            content = (entry.get("message") or {}).get("content")
            if entry.get("type") != "user" or entry.get("isMeta"):
                continue
            if isinstance(content, list) and all(
                b.get("type") == "text" for b in content
            ):
                prompts.append([str(b["text"]) for b in content])
    return prompts


def tool_results(snapshot: AgentSnapshot) -> list[str]:
    """Every tool result the model read, as stored."""
    return [m.text for m in snapshot.messages if m.role == "tool"]


async def test_a_read_tool_and_history_replay_through_a_resumed_session(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "read-and-recall"
        first = script_call("lookup_order", orderId="7")
        snap = await start_idle(rig.sessions, sid, first)
        assert snap.turns[0].final_text == "done: order 7: arrived broken"
        assert snap.pending_interrupts == []
        await rig.sessions.send_user_message(sid, "dex-script: say between")
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[1].final_text == "said: between"
        await rig.sessions.send_user_message(sid, "dex-script: recall")
        snap = await rig.sessions.wait_for_idle(sid)
        # The resumed Claude session holds every earlier prompt; the read did
        # not run again to rebuild it.
        assert snap.turns[-1].final_text == (
            f"recalled:\n{first}\ndex-script: say between"
        )
        assert rig.ledger.count("lookup_order") == 1


async def test_the_snapshot_after_a_turn(suite: SuiteEnv) -> None:
    async with in_process(suite) as rig:
        sid = "snapshot"
        prompt = script_call("lookup_order", orderId="7")
        snap = await start_idle(rig.sessions, sid, prompt)
        assert (snap.status, snap.pending_interrupts, snap.pending_prompts) == (
            "idle",
            [],
            [],
        )
        (turn,) = snap.turns
        assert (turn.status, turn.prompts, turn.error) == ("completed", [prompt], None)
        # An inline read is not a deferred call: nothing is recorded for it.
        assert turn.tool_calls == []
        assert turn.usage.model_calls == 2 and snap.usage.model_calls == 2
        assert snap.transcript_head is not None
        assert [m.role for m in snap.messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert [m.item["kind"] for m in snap.messages] == [
            "user_prompt",
            *["claude_transcript"] * 3,
        ]
        assert tool_results(snap) == ["order 7: arrived broken"]
        assert snap.messages[-1].text == turn.final_text


async def test_a_rejected_write_never_runs(suite: SuiteEnv) -> None:
    async with in_process(suite) as rig:
        sid = "rejected-write"
        await rig.sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        snap = await rig.resolve(sid, approved=False, message="not today")
        (record,) = snap.turns[0].tool_calls
        assert (record.status, record.rejection_message) == ("rejected", "not today")
        assert (
            snap.turns[0].final_text == "done: The user rejected this call: not today"
        )
        assert rig.ledger.count("create_refund_started") == 0


async def test_a_repeated_resolve_interrupt_runs_the_write_once(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "repeated-resolve"
        message = script_call("create_refund", orderId="7")
        interrupt = await start_to_interrupt(rig, sid, message)
        resolve = rig.sessions.resolve_interrupt
        assert await resolve(sid, interrupt.interrupt_id, approved=True)
        assert not await resolve(sid, interrupt.interrupt_id, approved=True)
        assert not await resolve(
            sid, interrupt.interrupt_id, approved=False, rejection_message="changed"
        )
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[0].final_text == "done: refunded order 7"
        assert [r.status for r in snap.turns[0].tool_calls] == ["finished"]
        assert rig.ledger.entries("create_refund") == [
            {
                "kind": "create_refund",
                "order_id": "7",
                "key": f"{sid}/turn-1/{interrupt.tool_call_id}",
            }
        ]


async def test_a_tool_error_result_records_failed_and_the_model_reads_it(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "tool-error"
        await rig.sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "invalid"}'
        )
        snap = await rig.resolve(sid)
        (record,) = snap.turns[0].tool_calls
        assert (record.status, record.output) == (
            "failed",
            "order invalid cannot be refunded",
        )
        assert snap.turns[0].final_text == "done: order invalid cannot be refunded"
        assert rig.ledger.count("create_refund_started") == 1
        assert rig.ledger.count("create_refund") == 0


async def test_a_write_that_raises_tool_execution_error_records_failed_once(
    suite: SuiteEnv,
) -> None:
    """README "When a tool fails": a raised `ToolExecutionError` is not an attempt that failed."""
    async with in_process(suite) as rig:
        sid = "tool-raises-error"
        await rig.sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "expired"}'
        )
        snap = await rig.resolve(sid)
        (record,) = snap.turns[0].tool_calls
        expected = "card expired: order expired cannot be refunded"
        assert (record.status, record.output, record.attempts) == (
            "failed",
            expected,
            1,
        )
        assert snap.turns[0].final_text == f"done: {expected}"
        assert rig.ledger.count("create_refund_started") == 1


async def test_an_inline_read_that_raises_is_an_error_result_not_a_retry(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "inline-read-raises"
        message = script_call("lookup_order", orderId="unreachable")
        snap = await start_idle(rig.sessions, sid, message)
        turn = snap.turns[0]
        assert turn.status == "completed"
        assert turn.final_text == "done: the order service is unreachable"
        assert turn.tool_calls == []  # it ran inline: no record, no Step
        assert rig.ledger.count("lookup_order") == 1
        steps = {
            (e.step_execution_id, e.attempt)
            for e in await rig.sessions.events(sid)
            if "run_model" in e.step_execution_id
        }
        assert steps == {("turn-1/run_model/1", 1)}, "one segment, one attempt"


async def test_two_writes_in_one_reply_run_one_at_a_time_in_order(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "two-writes"
        first = await start_to_interrupt(
            rig,
            sid,
            'dex-script: call create_refund {"orderId": "1"} '
            '&& call create_refund {"orderId": "2"}',
        )
        assert first.arguments == {"orderId": "1"}
        snap = await rig.resolve(sid)
        second = await rig.interrupt(sid)
        assert second.arguments == {"orderId": "2"}
        assert second.tool_call_id != first.tool_call_id
        snap = await rig.resolve(sid)
        assert snap.turns[0].final_text == "done: refunded order 1; refunded order 2"
        assert [r.arguments for r in snap.turns[0].tool_calls] == [
            {"orderId": "1"},
            {"orderId": "2"},
        ]
        assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == [
            "1",
            "2",
        ]
        # The model read why its second write waited, and called it again alone.
        assert any(REFUSAL in text for text in tool_results(snap))


async def test_a_reused_tool_use_id_never_runs(suite: SuiteEnv) -> None:
    async with in_process(suite) as rig:
        sid = "reused-id"
        # The CLI calls a write under the ID of the turn's inline read.
        snap = await start_idle(
            rig.sessions,
            sid,
            'dex-script: call lookup_order {"orderId": "7"} '
            ';; reuse create_refund {"orderId": "7"}',
        )
        assert snap.pending_interrupts == []
        assert snap.turns[0].final_text.startswith("reused create_refund: ")
        assert "already decided" in snap.turns[0].final_text
        # And a read under the ID of a resumed write, in its resumed segment.
        await rig.sessions.send_user_message(
            sid,
            'dex-script: call create_refund {"orderId": "8"} '
            ';; reuse lookup_order {"orderId": "8"}',
        )
        snap = await rig.resolve(sid)
        assert snap.turns[1].final_text.startswith("reused lookup_order: ")
        assert "already decided" in snap.turns[1].final_text
        # And in a later segment, whose stored transcript holds the call's result.
        await rig.sessions.send_user_message(
            sid,
            'dex-script: call create_refund {"orderId": "9"} '
            '&& call create_refund {"orderId": "10"} '
            ';; reuse lookup_order {"orderId": "9"}',
        )
        await rig.resolve(sid)
        snap = await rig.resolve(sid)
        assert snap.turns[2].final_text.startswith("reused lookup_order: ")
        assert "already has a result" in snap.turns[2].final_text
        assert rig.ledger.count("create_refund_started") == 3
        assert [e["order_id"] for e in rig.ledger.entries("lookup_order")] == ["7"]


async def test_a_cli_error_result_fails_the_turn(suite: SuiteEnv) -> None:
    async with in_process(suite) as rig:
        sid = "cli-error"
        snap = await start_idle(rig.sessions, sid, "dex-script: fail")
        (turn,) = snap.turns
        assert turn.status == "failed"
        assert turn.error is not None and "error result" in turn.error
        await rig.sessions.send_user_message(sid, "dex-script: say recovered")
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[1].final_text == "said: recovered"


async def test_a_resumed_turn_that_fails_after_a_write_leaves_a_note(
    suite: SuiteEnv,
) -> None:
    async with in_process(suite) as rig:
        sid = "fails-after-write"
        failed_prompt = 'dex-script: call create_refund {"orderId": "7"} ;; fail'
        interrupt = await start_to_interrupt(rig, sid, failed_prompt)
        snap = await rig.resolve(sid)
        (turn,) = snap.turns
        assert turn.status == "failed"
        assert [r.status for r in turn.tool_calls] == ["finished"]
        # Every RunModel attempt replayed the record; none ran the write again.
        assert rig.ledger.count("create_refund") == 1
        await rig.sessions.send_user_message(sid, "dex-script: say what happened")
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[1].final_text == "said: what happened"
        failed, note, prompt = cli_prompts(snap)[-1]
        assert failed == failed_prompt
        assert note.startswith("The previous turn (turn-1) failed:")
        assert (
            f"- create_refund {interrupt.tool_call_id}: finished (refunded order 7)"
            in note
        )
        assert prompt == "dex-script: say what happened"
        assert rig.ledger.count("create_refund") == 1


@pytest.mark.parametrize(
    "name", ["Bash", "Write", "Task", "Agent", "Read", "mcp__tools__create_refund"]
)
def test_custom_tool_names_that_collide_with_claude_code_tools_are_refused(
    suite: SuiteEnv, name: str
) -> None:
    @tool(name, "A tool named like a Claude Code tool", {"command": str})
    async def impostor(args: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("never defined, never run")

    tools = [*build_tools(suite.config()), impostor]
    with pytest.raises(TypeError, match=name):
        ClaudeAgentDefinition(options=ClaudeAgentOptions(), custom_tools=tools)

"""The tool-call gate against a misbehaving CLI: every rule of the README's Limits.

Each test plays the CLI's side (`gate_rig.CliSide`) with tool use IDs and tool
names a well-behaved CLI would never send, and checks that nothing runs that the
PreToolUse hook did not permit: the custom tool server is called over an
in-memory MCP transport, and the tools count their runs in a `Ledger`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, ResultMessage

from dex_agents._errors import SessionError
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._gate import ToolCallGate
from dex_agents.claude._pending_call import CallKind, PendingCall
from dex_agents.claude._runner import APPROVED_CLI_TOOL_OUTPUT
from dex_agents.claude._tools import CustomTool
from dex_agents.session import ToolCallsRequested
from dex_agents.session._records import ToolRecord
from support.claude_harness import Ledger, SessionDriver
from support.claude_steps import PermissionsRig, tool_permissions
from support.gate_rig import (
    CliSide,
    ScriptedCli,
    completed,
    deferred,
    tool_result_entry,
    tool_use_entry,
)

LOOKUP = "mcp__tools__lookup_order"
REFUND = "mcp__tools__create_refund"
APPROVED = {"orderId": "approved"}
"""The recorded (approved) arguments of every pending call."""
APPROVED_BASH = {"command": "echo approved"}


def refund_record(**changes: Any) -> ToolRecord:
    values: dict[str, Any] = {
        "tool_call_id": "p",
        "tool_name": "create_refund",
        "arguments": APPROVED,
        "status": "finished",
        "output": "refunded approved",
    }
    values.update(changes)
    return ToolRecord(**values)


def bash_record(**changes: Any) -> ToolRecord:
    values: dict[str, Any] = {
        "tool_call_id": "p",
        "tool_name": "Bash",
        "arguments": APPROVED_BASH,
        "status": "finished",
        "output": APPROVED_CLI_TOOL_OUTPUT,
        "finished_by_resumed_turn": True,
    }
    values.update(changes)
    return ToolRecord(**values)


def custom_pending(**changes: Any) -> PendingCall:
    return PendingCall(
        tool_use_id="p",
        kind="custom",
        tool_name=REFUND,
        record=refund_record(**changes),
    )


def cli_pending(**changes: Any) -> PendingCall:
    return PendingCall(
        tool_use_id="p", kind="cli", tool_name="Bash", record=bash_record(**changes)
    )


class Rig(PermissionsRig):
    """One segment's ToolPermissions and gate, with counted tools."""

    def __init__(
        self,
        *,
        pending: PendingCall | None = None,
        answered: frozenset[str] = frozenset(),
        matchers: list[HookMatcher] | None = None,
    ) -> None:
        self.ledger = Ledger()
        self.tools = {t.name: CustomTool.from_sdk(t) for t in self.ledger.tools()}
        runner = ClaudeAgentRunner(ClaudeAgentDefinition(options=ClaudeAgentOptions()))
        context = SessionDriver(runner).context(
            turn_id="turn-1", step=1, pending=(), resume=None
        )
        self.gate = ToolCallGate()
        self.permissions = tool_permissions(
            context,
            self.gate,
            self.tools,
            matchers=matchers,
            pending=pending,
            answered=answered,
        )


# The custom tool server runs a tool only under the ID and name the hook permitted.


async def test_the_server_runs_only_the_permitted_tool_under_the_permitted_id() -> None:
    rig = Rig()
    async with rig.cli() as cli:
        assert await cli.decision(LOOKUP, {"orderId": "7"}, "a") == "allow"
        assert (await cli.call("create_refund", {"orderId": "7"}, "a")).refused
        assert (await cli.call("lookup_order", {"orderId": "7"}, "b")).refused
        assert (await cli.call("lookup_order", {"orderId": "7"}, None)).refused
        served = await cli.call("lookup_order", {"orderId": "7"}, "a")
        assert (served.text, served.is_error) == ("order 7: broken", False)
    assert rig.ledger.lookups == [{"orderId": "7"}]
    assert rig.ledger.refunds == []


async def test_the_server_never_runs_a_call_the_hook_deferred_denied_or_left_to_the_cli() -> (
    None
):
    rig = Rig()
    async with rig.cli() as cli:
        assert await cli.decision(REFUND, {"orderId": "1"}, "defer") == "defer"
        assert await cli.decision(REFUND, {"orderId": "2"}, "second") == "deny"
        assert await cli.decision("Read", {"file_path": "/x"}, "read") == "allow"
        assert await cli.decision("mcp__tools__nope", {}, "unknown") == "deny"
        for call_id in ("defer", "second"):
            assert (await cli.call("create_refund", {"orderId": "1"}, call_id)).refused
        assert (await cli.call("lookup_order", {"orderId": "1"}, "read")).refused
        assert (await cli.call("lookup_order", {"orderId": "1"}, "unknown")).refused
    assert rig.ledger.lookups == [] and rig.ledger.refunds == []


# A recorded call replays only as its own tool, once, with its recorded arguments.


async def test_a_record_replays_once_with_its_recorded_arguments() -> None:
    rig = Rig(pending=custom_pending())
    async with rig.cli() as cli:
        out = await cli.pre_tool_use(REFUND, {"orderId": "the model's"}, "p")
        assert (out["permissionDecision"], out["updatedInput"]) == ("allow", APPROVED)
        served = await cli.call("create_refund", {"orderId": "the model's"}, "p")
        assert (served.text, served.is_error) == ("refunded approved", False)
        assert (await cli.call("create_refund", APPROVED, "p")).refused
    assert rig.ledger.refunds == []


@pytest.mark.parametrize(
    "other", ["Bash", "Write", LOOKUP, "mcp__other__create_refund"]
)
async def test_a_custom_record_never_replays_as_another_tool(other: str) -> None:
    rig = Rig(pending=custom_pending())
    async with rig.cli() as cli:
        out = await cli.pre_tool_use(other, {"command": "x", "orderId": "x"}, "p")
        assert out["permissionDecision"] == "deny"
        assert "updatedInput" not in out
        # The ID is decided now; its own tool cannot take it back.
        assert await cli.decision(REFUND, APPROVED, "p") == "deny"
        assert (await cli.can_use_tool(REFUND, APPROVED, "p")).behavior == "deny"
        assert (await cli.call("create_refund", APPROVED, "p")).refused
        assert (await cli.call("lookup_order", APPROVED, "p")).refused
    assert rig.ledger.refunds == [] and rig.ledger.lookups == []


async def test_a_cli_record_never_replays_as_a_served_tool() -> None:
    rig = Rig(pending=cli_pending())
    async with rig.cli() as cli:
        assert await cli.decision(REFUND, {"orderId": "1"}, "p") == "deny"
        assert (await cli.call("create_refund", {"orderId": "1"}, "p")).refused
    assert rig.ledger.refunds == []


@pytest.mark.parametrize(
    ("kind", "tool_name", "record"),
    [
        # A custom record whose run state says it was deferred as Bash.
        ("custom", "Bash", refund_record()),
        # A custom record whose run state says it was deferred inside the CLI.
        ("cli", REFUND, refund_record()),
        # A CLI record whose run state says the custom tool server serves it.
        ("custom", REFUND, bash_record()),
    ],
)
async def test_a_record_replays_only_as_the_tool_and_kind_it_records(
    kind: CallKind, tool_name: str, record: ToolRecord
) -> None:
    pending = PendingCall(
        tool_use_id="p", kind=kind, tool_name=tool_name, record=record
    )
    hooked, asked = Rig(pending=pending), Rig(pending=pending)
    async with hooked.cli() as cli:
        out = await cli.pre_tool_use(tool_name, {"command": "rm -rf /"}, "p")
        assert out["permissionDecision"] == "deny"
        assert (await cli.call("create_refund", {}, "p")).refused
    async with asked.cli() as cli:
        answer = await cli.can_use_tool(tool_name, {"command": "rm -rf /"}, "p")
        assert answer.behavior == "deny"
        assert (await cli.call("create_refund", {}, "p")).refused
    assert hooked.ledger.refunds == [] and asked.ledger.refunds == []


async def test_a_resumed_cli_tool_runs_with_its_approved_input() -> None:
    rig = Rig(pending=cli_pending())
    async with rig.cli() as cli:
        out = await cli.pre_tool_use("Bash", {"command": "rm -rf /"}, "p")
        assert (out["permissionDecision"], out["updatedInput"]) == (
            "allow",
            APPROVED_BASH,
        )


# Only the pending deferred call replays; an answered call is denied.


async def test_a_call_whose_result_the_transcript_holds_is_denied() -> None:
    rig = Rig(pending=custom_pending(), answered=frozenset({"old"}))
    async with rig.cli() as cli:
        out = await cli.pre_tool_use(REFUND, APPROVED, "old")
        assert out["permissionDecision"] == "deny"
        assert "already has a result" in out["permissionDecisionReason"]
        assert (await cli.call("create_refund", APPROVED, "old")).refused
        assert (await cli.call("lookup_order", APPROVED, "old")).refused
        assert (await cli.can_use_tool(REFUND, APPROVED, "old")).behavior == "deny"
        # The pending call itself still replays.
        assert await cli.decision(REFUND, APPROVED, "p") == "allow"
    assert rig.ledger.refunds == [] and rig.ledger.lookups == []


async def test_a_fresh_can_use_tool_request_for_an_answered_call_is_denied() -> None:
    rig = Rig(answered=frozenset({"old"}))
    async with rig.cli() as cli:
        assert (await cli.can_use_tool(LOOKUP, {"orderId": "1"}, "old")).behavior == (
            "deny"
        )
        assert (await cli.call("lookup_order", {"orderId": "1"}, "old")).refused
    assert rig.ledger.lookups == []


# One PreToolUse decision per tool use ID per segment.


@pytest.mark.parametrize(
    ("pending", "name", "first"),
    [
        (None, LOOKUP, "allow"),
        (None, REFUND, "defer"),
        (None, "mcp__tools__nope", "deny"),
        (custom_pending(), REFUND, "replay"),
        (cli_pending(status="rejected", rejection_message="no"), "Bash", "ask"),
    ],
)
@pytest.mark.parametrize("again", [LOOKUP, REFUND, "Bash"])
async def test_a_repeated_pre_tool_use_is_denied_and_keeps_the_first_decision(
    pending: PendingCall | None, name: str, first: str, again: str
) -> None:
    rig = Rig(pending=pending)
    call_id = "p" if pending is not None else "a"
    async with rig.cli() as cli:
        await cli.decision(name, {"orderId": "1"}, call_id)
        assert rig.kind(call_id) == first
        deferral = rig.gate.deferral
        out = await cli.pre_tool_use(again, {"orderId": "2", "command": "x"}, call_id)
        assert out["permissionDecision"] == "deny"
        assert "updatedInput" not in out
        assert rig.kind(call_id) == first
        assert rig.gate.deferral == deferral
        if first != "allow":
            assert (await cli.call("lookup_order", {"orderId": "2"}, call_id)).refused
        if first not in ("replay", "defer"):
            assert (await cli.call("create_refund", {"orderId": "2"}, call_id)).refused
    assert rig.ledger.refunds == []


# can_use_tool: nothing after an allow; a resumed call once, from its record.


@pytest.mark.parametrize(
    ("name", "tool_input"),
    [
        (LOOKUP, {"orderId": "7"}),
        (LOOKUP, {"orderId": "8"}),
        (REFUND, {"orderId": "7"}),
        ("Bash", {"command": "rm -rf /"}),
        ("Read", {"file_path": "/etc/passwd"}),
    ],
)
async def test_can_use_tool_denies_every_request_for_an_allowed_id(
    name: str, tool_input: dict[str, Any]
) -> None:
    rig = Rig(pending=cli_pending())
    async with rig.cli() as cli:
        assert await cli.decision(LOOKUP, {"orderId": "7"}, "a") == "allow"
        assert await cli.decision("Read", {"file_path": "/x"}, "r") == "allow"
        assert await cli.decision("Bash", {"command": "x"}, "p") == "allow"
        for call_id in ("a", "r", "p"):
            answer = await cli.can_use_tool(name, tool_input, call_id)
            assert answer.behavior == "deny", call_id


@pytest.mark.parametrize("pending", [custom_pending(), cli_pending()])
async def test_can_use_tool_answers_a_resumed_call_once_with_its_recorded_arguments(
    pending: PendingCall,
) -> None:
    rig = Rig(pending=pending)
    async with rig.cli() as cli:
        first = await cli.can_use_tool(
            pending.tool_name, {"orderId": "cli", "command": "rm -rf /"}, "p"
        )
        assert first.behavior == "allow"
        assert first.updated_input == pending.record.arguments
        again = await cli.can_use_tool(pending.tool_name, pending.record.arguments, "p")
        assert again.behavior == "deny"
        assert await cli.decision(pending.tool_name, {}, "p") == "deny"
        if pending.kind == "custom":
            served = await cli.call("create_refund", {"orderId": "cli"}, "p")
            assert served.text == "refunded approved"
            assert (await cli.call("create_refund", {"orderId": "cli"}, "p")).refused
    assert rig.ledger.refunds == []


@pytest.mark.parametrize(
    ("pending", "other"),
    [
        (custom_pending(), "Bash"),
        (custom_pending(), LOOKUP),
        (cli_pending(), "Write"),
        (cli_pending(), REFUND),
    ],
)
async def test_can_use_tool_refuses_a_resumed_call_under_another_tool(
    pending: PendingCall, other: str
) -> None:
    rig = Rig(pending=pending)
    async with rig.cli() as cli:
        answer = await cli.can_use_tool(other, {"command": "x", "orderId": "x"}, "p")
        assert answer.behavior == "deny"
        # The one answer is spent: the right tool does not get a second one.
        own = await cli.can_use_tool(pending.tool_name, pending.record.arguments, "p")
        assert own.behavior == "deny"
        assert (await cli.call("create_refund", APPROVED, "p")).refused
        assert (await cli.call("lookup_order", APPROVED, "p")).refused
    assert rig.ledger.refunds == [] and rig.ledger.lookups == []


async def test_can_use_tool_denies_what_nothing_authorized() -> None:
    rig = Rig(pending=custom_pending())
    async with rig.cli() as cli:
        answer = await cli.can_use_tool(REFUND, {"orderId": "1"}, "z")
        assert answer.behavior == "deny"
        assert (await cli.call("create_refund", {"orderId": "1"}, "z")).refused
    assert rig.ledger.refunds == []


# Application PreToolUse hooks never see a resumed call that has a final record.


@pytest.mark.parametrize("pending", [custom_pending(), cli_pending()])
async def test_application_hooks_are_skipped_for_a_resumed_call(
    pending: PendingCall,
) -> None:
    seen: list[str] = []

    async def deny_and_rewrite(hook_input: Any, call_id: str | None, _c: Any) -> Any:
        seen.append(str(call_id))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "the application says no",
                "updatedInput": {"command": "rm -rf /", "orderId": "rewritten"},
            }
        }

    rig = Rig(pending=pending, matchers=[HookMatcher(hooks=[deny_and_rewrite])])
    async with rig.cli() as cli:
        out = await cli.pre_tool_use(pending.tool_name, {"orderId": "model"}, "p")
        assert (out["permissionDecision"], out["updatedInput"]) == (
            "allow",
            pending.record.arguments,
        )
        assert seen == []
        assert await cli.decision("Bash", {"command": "ls"}, "new") == "deny"
        assert seen == ["new"]


# Whole segments: a deferral the hook did not make fails the segment, and a
# resumed call's ID is refused in its segment and in later ones.


def scripted_runner(ledger: Ledger, tmp_path: Path) -> SessionDriver:
    options = ClaudeAgentOptions(
        cli_path=str(tmp_path / "never-started"), cwd=str(tmp_path)
    )
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(options=options, custom_tools=ledger.tools())
    )
    return SessionDriver(runner)


async def defer_refund(cli: CliSide) -> None:
    assert await cli.decision(REFUND, {"orderId": "1"}, "a") == "defer"


async def allow_lookup(cli: CliSide) -> None:
    assert await cli.decision(LOOKUP, {"orderId": "1"}, "a") == "allow"


async def ask_nothing(cli: CliSide) -> None:
    del cli


@pytest.mark.parametrize(
    ("before", "result"),
    [
        # The hook never deferred anything.
        (ask_nothing, deferred("a", REFUND, {"orderId": "1"})),
        (allow_lookup, deferred("a", LOOKUP, {"orderId": "1"})),
        # The hook deferred, but the CLI names another ID or another tool.
        (defer_refund, deferred("b", REFUND, {"orderId": "1"})),
        (defer_refund, deferred("a", "Bash", {"command": "ls"})),
        (defer_refund, deferred("a", LOOKUP, {"orderId": "1"})),
        # The CLI says it deferred, but names no call.
        (defer_refund, deferred(None)),
    ],
)
async def test_a_deferral_the_hook_did_not_make_fails_the_segment(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    before: Callable[[CliSide], Awaitable[None]],
    result: ResultMessage,
) -> None:
    async def script(cli: CliSide) -> ResultMessage:
        await before(cli)
        return result

    ledger = Ledger()
    ScriptedCli(monkeypatch, script)
    driver = scripted_runner(ledger, tmp_path)
    with pytest.raises(SessionError, match="did not defer") as raised:
        await driver.turn("refund order 1")
    assert raised.value.retryable
    assert ledger.refunds == []


async def test_the_deferral_the_hook_made_ends_the_segment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def script(cli: CliSide) -> ResultMessage:
        await defer_refund(cli)
        return deferred("a", REFUND, {"orderId": "1"})

    ScriptedCli(monkeypatch, script)
    driver = scripted_runner(Ledger(), tmp_path)
    context = driver.context(
        turn_id="turn-1", step=1, pending=({"text": "refund 1"},), resume=None
    )
    result = await driver.runner.run_model(context)
    assert isinstance(result, ToolCallsRequested)
    assert [c.tool_call_id for c in result.calls] == ["a"]


async def test_a_resumed_calls_id_is_refused_in_its_segment_and_in_later_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def defer_p(cli: CliSide) -> ResultMessage:
        assert await cli.decision(REFUND, {"orderId": "1"}, "p") == "defer"
        await cli.mirror(tool_use_entry("u1", "p", REFUND))
        return deferred("p", REFUND, {"orderId": "1"})

    async def resume_p_then_defer_q(cli: CliSide) -> ResultMessage:
        out = await cli.pre_tool_use(REFUND, {"orderId": "the model's"}, "p")
        assert (out["permissionDecision"], out["updatedInput"]) == (
            "allow",
            {"orderId": "1"},
        )
        assert (await cli.call("create_refund", {}, "p")).text == "refunded 1"
        # The resumed call's ID again in its own segment, as itself or another tool.
        assert await cli.decision(REFUND, {"orderId": "1"}, "p") == "deny"
        assert await cli.decision(LOOKUP, {"orderId": "1"}, "p") == "deny"
        assert await cli.decision("Bash", {"command": "ls"}, "p") == "deny"
        assert (await cli.can_use_tool("Bash", {"command": "ls"}, "p")).behavior == (
            "deny"
        )
        assert (await cli.call("create_refund", {}, "p")).refused
        assert (await cli.call("lookup_order", {"orderId": "1"}, "p")).refused
        await cli.mirror(tool_result_entry("u2", "p", "refunded 1"))
        assert await cli.decision(REFUND, {"orderId": "2"}, "q") == "defer"
        await cli.mirror(tool_use_entry("u3", "q", REFUND))
        return deferred("q", REFUND, {"orderId": "2"})

    async def resume_q_reusing_p(cli: CliSide) -> ResultMessage:
        # A later segment of the turn: p's result is in the stored transcript.
        out = await cli.pre_tool_use(REFUND, {"orderId": "1"}, "p")
        assert out["permissionDecision"] == "deny"
        assert "already has a result" in out["permissionDecisionReason"]
        assert await cli.decision(REFUND, {"orderId": "2"}, "q") == "allow"
        assert (await cli.call("create_refund", {}, "q")).text == "refunded 2"
        assert (await cli.call("create_refund", {}, "p")).refused
        await cli.mirror(tool_result_entry("u4", "q", "refunded 2"))
        return completed()

    async def next_turn_reusing_p_and_q(cli: CliSide) -> ResultMessage:
        for call_id in ("p", "q"):
            assert await cli.decision(LOOKUP, {"orderId": "1"}, call_id) == "deny"
            assert await cli.decision(REFUND, {"orderId": "1"}, call_id) == "deny"
            assert (await cli.call("lookup_order", {"orderId": "1"}, call_id)).refused
        answer = await cli.can_use_tool(REFUND, {"orderId": "1"}, "fresh")
        assert answer.behavior == "deny"
        return completed("second")

    ledger = Ledger()
    scripts = ScriptedCli(
        monkeypatch,
        defer_p,
        resume_p_then_defer_q,
        resume_q_reusing_p,
        next_turn_reusing_p_and_q,
    )
    driver = scripted_runner(ledger, tmp_path)
    first = await driver.turn("refund 1 and 2")
    assert [c.tool_call_id for c in first.calls] == ["p", "q"]
    second = await driver.turn("thanks")
    assert second.text == "second"
    assert scripts.remaining == 0
    assert ledger.refunds == [{"orderId": "1"}, {"orderId": "2"}]
    assert ledger.lookups == []

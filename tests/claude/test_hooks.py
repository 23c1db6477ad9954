"""The adapter's PreToolUse decisions and can_use_tool, without a CLI, and what the
permission callback sees after the application's hooks (on the fake CLI)."""

from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookMatcher,
    ToolAnnotations,
    ToolPermissionContext,
    tool,
)

from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentRunner,
    ClaudeCodeToolDenial,
    ClaudeCodeToolPermission,
)
from dex_agents.claude._gate import Deferral, ToolCallGate
from dex_agents.claude._hooks import ToolPermissions
from dex_agents.claude._pending_call import PendingCall
from dex_agents.claude._tools import CustomTool
from dex_agents.session import (
    RunModelContext,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.session._records import ToolRecord
from support.claude_harness import (
    PermissionRecorder,
    SessionDriver,
    bash,
    fake_options,
)
from support.claude_steps import tool_permissions


@tool("lookup", "Look up", {"id": str}, annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "found"}]}


@tool("refund", "Refund", {"id": str})
async def refund(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "refunded"}]}


TOOLS = {t.name: CustomTool.from_sdk(t) for t in (lookup, refund)}


def make_context() -> tuple[RunModelContext, SessionDriver]:
    runner = ClaudeAgentRunner(ClaudeAgentDefinition(options=ClaudeAgentOptions()))
    driver = SessionDriver(runner)
    return driver.context(turn_id="turn-1", step=1, pending=(), resume=None), driver


def permissions(
    *,
    policies: dict[str, ToolPolicy] | None = None,
    matchers: list[HookMatcher] | None = None,
    permission: ClaudeCodeToolPermission | None = None,
    pending: PendingCall | None = None,
) -> tuple[ToolPermissions, ToolCallGate, SessionDriver]:
    context, driver = make_context()
    gate = ToolCallGate()
    return (
        tool_permissions(
            context,
            gate,
            TOOLS,
            policies=policies,
            matchers=matchers,
            permission=permission,
            pending=pending,
        ),
        gate,
        driver,
    )


def hook_input(
    name: str, tool_input: dict[str, Any], call_id: str, **extra: Any
) -> Any:
    return {
        "session_id": "s",
        "transcript_path": "/t",
        "cwd": "/",
        "hook_event_name": "PreToolUse",
        "tool_name": name,
        "tool_input": tool_input,
        "tool_use_id": call_id,
        **extra,
    }


async def decide(
    p: ToolPermissions,
    name: str,
    tool_input: dict[str, Any],
    call_id: str,
    **extra: Any,
) -> dict[str, Any]:
    output: Any = await p.pre_tool_use(
        hook_input(name, tool_input, call_id, **extra), call_id, {"signal": None}
    )
    return output["hookSpecificOutput"]


async def decision_of(
    p: ToolPermissions,
    name: str,
    tool_input: dict[str, Any],
    call_id: str,
    **extra: Any,
) -> str:
    """The permission decision of PreToolUse for the call."""
    return (await decide(p, name, tool_input, call_id, **extra))["permissionDecision"]


async def assert_lookup_defers_for_approval(
    p: ToolPermissions, gate: ToolCallGate
) -> Deferral:
    """PreToolUse defers a lookup call "a", as a read that needs approval."""
    assert await decision_of(p, "mcp__tools__lookup", {"id": "1"}, "a") == "defer"
    deferral = gate.deferral
    assert deferral is not None
    assert deferral.call.policy == ToolPolicy(effect="read", requires_approval=True)
    return deferral


def kind_of(gate: ToolCallGate, call_id: str) -> str | None:
    decision = gate.decision(call_id)
    return None if decision is None else decision.kind


def ctx(call_id: str) -> ToolPermissionContext:
    return ToolPermissionContext(tool_use_id=call_id)


async def test_reads_run_inline_and_the_first_write_defers() -> None:
    p, gate, driver = permissions()
    assert await decision_of(p, "mcp__tools__lookup", {"id": "1"}, "a") == "allow"
    assert await decision_of(p, "Read", {"file_path": "/x"}, "b") == "allow"
    assert await decision_of(p, "mcp__tools__refund", {"id": "1"}, "c") == "defer"
    second = await decide(p, "mcp__tools__refund", {"id": "2"}, "d")
    assert second["permissionDecision"] == "deny"
    assert second["permissionDecisionReason"] == (
        "refund did not run: only one call that needs its own step can run per reply. "
        "Call again by itself."
    )
    bash = await decide(p, "Bash", {"command": "ls"}, "e")
    assert bash["permissionDecision"] == "deny"
    deferral = gate.deferral
    assert deferral is not None
    assert deferral.call.tool_name == "refund"
    assert deferral.call.arguments == {"id": "1"}
    assert deferral.call.policy == ToolPolicy(effect="unclassified")
    assert deferral.call.metadata == {
        "kind": "custom",
        "claude_tool_name": "mcp__tools__refund",
    }
    started = [e.data["tool_name"] for e in driver.sink.of_type("tool_call_started")]
    assert started == ["lookup", "Read"]


async def test_a_second_decision_for_one_id_is_refused() -> None:
    p, gate, _ = permissions()
    await decide(p, "mcp__tools__lookup", {"id": "1"}, "a")
    again = await decide(p, "mcp__tools__lookup", {"id": "1"}, "a")
    assert again["permissionDecision"] == "deny"
    assert kind_of(gate, "a") == "allow"


async def test_unknown_tool_of_the_server_is_denied() -> None:
    p, _, _ = permissions()
    out = await decide(p, "mcp__tools__nope", {}, "a")
    assert out["permissionDecision"] == "deny"


async def test_policies_decide_approval_and_effect() -> None:
    policies = {
        "lookup": ToolPolicy(effect="read", requires_approval=True),
        "Bash": ToolPolicy(effect="idempotent_write"),
    }
    p, gate, _ = permissions(policies=policies)
    assert await decision_of(p, "Bash", {"command": "ls"}, "b") == "allow"
    await assert_lookup_defers_for_approval(p, gate)


async def test_deferrable_calls_inside_subagents_are_denied() -> None:
    p, gate, _ = permissions()
    out = await decide(p, "mcp__tools__refund", {"id": "1"}, "a", agent_id="agent-1")
    assert out["permissionDecision"] == "deny"
    assert "Call refund from the main conversation" in out["permissionDecisionReason"]
    assert "Call again by itself" not in out["permissionDecisionReason"]
    assert (
        await decide(p, "mcp__tools__lookup", {"id": "1"}, "b", agent_id="agent-1")
    )["permissionDecision"] == "allow"
    assert gate.deferral is None


async def test_application_hooks_rewrite_what_is_deferred() -> None:
    async def rewrite(hook_input: Any, _id: str | None, _c: Any) -> Any:
        return {
            "systemMessage": "rewritten",
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {"id": "9"},
                "additionalContext": "note",
            },
        }

    p, gate, _ = permissions(
        matchers=[HookMatcher(matcher="mcp__tools__.*", hooks=[rewrite])]
    )
    output: Any = await p.pre_tool_use(
        hook_input("mcp__tools__refund", {"id": "1"}, "a"), "a", {"signal": None}
    )
    assert output["systemMessage"] == "rewritten"
    assert output["hookSpecificOutput"]["additionalContext"] == "note"
    assert gate.deferral is not None and gate.deferral.call.arguments == {"id": "9"}
    inline = await decide(p, "mcp__tools__lookup", {"id": "1"}, "b")
    assert inline["updatedInput"] == {"id": "9"}
    decision = gate.decision("b")
    assert decision is not None and decision.arguments == {"id": "9"}


async def test_application_ask_defers_with_approval_and_deny_denies() -> None:
    async def ask(_input: Any, _id: str | None, _c: Any) -> Any:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "ask",
                "permissionDecisionReason": "look first",
            }
        }

    async def deny(_input: Any, _id: str | None, _c: Any) -> Any:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "never",
            }
        }

    p, gate, _ = permissions(
        matchers=[
            HookMatcher(matcher="mcp__tools__lookup", hooks=[ask]),
            HookMatcher(matcher="Bash", hooks=[deny]),
        ]
    )
    assert (await decide(p, "Bash", {"command": "ls"}, "b"))[
        "permissionDecisionReason"
    ] == "never"
    deferral = await assert_lookup_defers_for_approval(p, gate)
    assert deferral.call.reason == "look first"


async def test_claude_code_tool_permission_decides_cli_calls() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def permission(
        _context: RunModelContext, name: str, tool_input: dict[str, Any]
    ) -> Any:
        asked.append((name, tool_input))
        command = str(tool_input.get("command", ""))
        if command.startswith("rm"):
            return ClaudeCodeToolDenial("no deleting")
        if command == "boom":
            raise RuntimeError("cannot decide")
        if command.startswith("ls"):
            return ToolPolicy(effect="read")
        return None

    p, gate, _ = permissions(permission=permission)
    assert await decision_of(p, "Bash", {"command": "ls"}, "a") == "allow"
    rm = await decide(p, "Bash", {"command": "rm -rf /"}, "b")
    assert (rm["permissionDecision"], rm["permissionDecisionReason"]) == (
        "deny",
        "no deleting",
    )
    boom = await decide(p, "Bash", {"command": "boom"}, "c")
    assert (boom["permissionDecision"], boom["permissionDecisionReason"]) == (
        "deny",
        "cannot decide",
    )
    assert await decision_of(p, "Bash", {"command": "touch x"}, "d") == "defer"
    assert await decision_of(p, "mcp__tools__lookup", {"id": "1"}, "e") == "allow"
    assert [name for name, _ in asked] == ["Bash"] * 4
    assert gate.deferral is not None and gate.deferral.call.metadata["kind"] == "cli"


def pending(kind: str, name: str, status: str, **extra: Any) -> PendingCall:
    record = ToolRecord(
        tool_call_id="p1",
        tool_name="refund" if kind == "custom" else name,
        arguments={"id": "approved"},
        # The parametrized status is one of ToolRecordStatus.
        status=status,  # pyright: ignore[reportArgumentType]
        **extra,
    )
    # `kind` is "custom" or "cli" in every caller.
    return PendingCall(tool_use_id="p1", kind=kind, tool_name=name, record=record)  # pyright: ignore[reportArgumentType]


async def test_a_resumed_custom_call_replays_its_record_without_application_hooks() -> (
    None
):
    called: list[str] = []

    async def app_hook(_input: Any, call_id: str | None, _c: Any) -> Any:
        called.append(str(call_id))
        return {}

    p, gate, _ = permissions(
        matchers=[HookMatcher(hooks=[app_hook])],
        pending=pending("custom", "mcp__tools__refund", "finished", output="ok"),
    )
    out = await decide(p, "mcp__tools__refund", {"id": "original"}, "p1")
    assert (out["permissionDecision"], out["updatedInput"]) == (
        "allow",
        {"id": "approved"},
    )
    assert called == []
    assert gate.permit_served_call("p1", "refund") is not None
    assert gate.permit_served_call("p1", "refund") is None


async def test_a_record_replays_only_as_its_own_tool() -> None:
    p, gate, _ = permissions(
        pending=pending("custom", "mcp__tools__refund", "finished")
    )
    out = await decide(p, "Bash", {"command": "ls"}, "p1")
    assert out["permissionDecision"] == "deny"
    assert gate.permit_served_call("p1", "refund") is None


async def test_an_approved_cli_call_runs_with_the_approved_input() -> None:
    p, gate, _ = permissions(pending=pending("cli", "Bash", "finished"))
    out = await decide(p, "Bash", {"command": "original"}, "p1")
    assert (out["permissionDecision"], out["updatedInput"]) == (
        "allow",
        {"id": "approved"},
    )
    assert kind_of(gate, "p1") == "replay"
    denied = await p.can_use_tool("Bash", {}, ctx("p1"))
    assert denied.behavior == "deny"


@pytest.mark.parametrize(
    ("status", "extra", "text"),
    [
        (
            "rejected",
            {"rejection_message": "not today"},
            "The user rejected this call: not today",
        ),
        ("failed", {"output": "it broke"}, "it broke"),
        ("outcome_unknown", {}, "The outcome of Bash is unknown"),
    ],
)
async def test_a_cli_call_that_must_not_run_is_asked_and_denied(
    status: str, extra: dict[str, Any], text: str
) -> None:
    p, _, _ = permissions(pending=pending("cli", "Bash", status, **extra))
    out = await decide(p, "Bash", {"command": "x"}, "p1")
    assert out["permissionDecision"] == "ask"
    answer = await p.can_use_tool("Bash", {"command": "x"}, ctx("p1"))
    assert answer.behavior == "deny" and answer.message.startswith(text)
    again = await p.can_use_tool("Bash", {"command": "x"}, ctx("p1"))
    assert again.behavior == "deny" and "already decided" in again.message


async def test_can_use_tool_answers_a_resumed_call_whose_hook_did_not_run() -> None:
    p, gate, _ = permissions(
        pending=pending("custom", "mcp__tools__refund", "finished")
    )
    answer = await p.can_use_tool("mcp__tools__refund", {"id": "original"}, ctx("p1"))
    assert answer.behavior == "allow" and answer.updated_input == {"id": "approved"}
    assert gate.permit_served_call("p1", "refund") is not None
    again = await p.can_use_tool("mcp__tools__refund", {}, ctx("p1"))
    assert again.behavior == "deny"
    hook = await decide(p, "mcp__tools__refund", {}, "p1")
    assert hook["permissionDecision"] == "deny"


async def test_can_use_tool_for_resumed_cli_calls() -> None:
    p, _, _ = permissions(pending=pending("cli", "Bash", "finished"))
    allowed = await p.can_use_tool("Bash", {"command": "original"}, ctx("p1"))
    assert allowed.behavior == "allow" and allowed.updated_input == {"id": "approved"}
    p, _, _ = permissions(
        pending=pending("cli", "Bash", "rejected", rejection_message="no")
    )
    denied = await p.can_use_tool("Bash", {}, ctx("p1"))
    assert (
        denied.behavior == "deny"
        and denied.message == "The user rejected this call: no"
    )
    p, _, _ = permissions(pending=pending("cli", "Bash", "finished"))
    other = await p.can_use_tool("Write", {}, ctx("p1"))
    assert other.behavior == "deny" and "recorded as Bash" in other.message


async def test_can_use_tool_denies_everything_else() -> None:
    p, _, _ = permissions()
    await decide(p, "mcp__tools__lookup", {"id": "1"}, "a")
    after_allow = await p.can_use_tool("mcp__tools__lookup", {}, ctx("a"))
    assert after_allow.behavior == "deny"
    undecided = await p.can_use_tool("Bash", {}, ctx("z"))
    assert undecided.behavior == "deny" and "did not authorize" in undecided.message


async def test_an_id_that_already_has_a_result_never_runs_again() -> None:
    context, _ = make_context()
    gate = ToolCallGate()
    p = ToolPermissions(
        context=context,
        gate=gate,
        tools=TOOLS,
        server_name="tools",
        policies={},
        default_effect="unclassified",
        app_matchers=[],
        permission=None,
        pending=None,
        answered=frozenset({"old"}),
    )
    out = await decide(p, "mcp__tools__lookup", {"id": "1"}, "old")
    assert out["permissionDecision"] == "deny"
    assert "already has a result" in out["permissionDecisionReason"]
    assert gate.permit_served_call("old", "lookup") is None


async def test_row78_the_permission_callback_gets_the_hook_rewritten_input_and_the_run_model_context(
    tmp_path: Path,
) -> None:
    """Row 78: the callback sees the input after the application's PreToolUse hooks
    (what runs), and the context is the very RunModelContext of the attempt."""
    hook_saw: list[dict[str, Any]] = []

    async def rewrite_bash(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        hook_saw.append(dict(hook_input["tool_input"]))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {
                    "command": "echo rewritten >> audit.log; echo rewritten-ran"
                },
            }
        }

    permission = PermissionRecorder(ToolPolicy(effect="read"))
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(
                tmp_path,
                hooks={
                    "PreToolUse": [HookMatcher(matcher="Bash", hooks=[rewrite_bash])]
                },
            ),
            claude_code_tool_permission=permission,
        )
    )
    driver = SessionDriver(runner, session_id="audit-row78")
    original = "echo original >> audit.log; echo original-ran"
    item = runner.build_user_message(bash(original))
    context = driver.context(turn_id="turn-1", step=1, pending=(item,), resume=None)
    result = await runner.run_model(context)

    assert hook_saw == [{"command": original}]
    assert permission.asked == [
        ("Bash", {"command": "echo rewritten >> audit.log; echo rewritten-ran"})
    ]
    (asked_context,) = permission.contexts
    assert asked_context is context
    assert (
        asked_context.session_id,
        asked_context.turn_id,
        asked_context.step_execution_id,
        asked_context.attempt,
    ) == ("audit-row78", "turn-1", "turn-1/run_model-1", 1)
    # The callback's read ran the call inline, with the input it was asked about.
    assert isinstance(result, TurnCompleted)
    assert result.final_text == "done: rewritten-ran"
    assert (tmp_path / "cwd" / "audit.log").read_text().splitlines() == ["rewritten"]

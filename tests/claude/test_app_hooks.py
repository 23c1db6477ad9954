import asyncio
from typing import Any

import pytest
from claude_agent_sdk import HookMatcher

from dex_agents.claude._app_hooks import (
    matcher_matches,
    matchers_timeout,
    run_app_hooks,
)

INPUT: dict[str, Any] = {
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "ls"},
    "tool_use_id": "t1",
}


def hook(output: object, seen: list[dict[str, Any]] | None = None) -> Any:
    async def callback(hook_input: Any, tool_use_id: str | None, _context: Any) -> Any:
        assert tool_use_id == "t1"
        if seen is not None:
            seen.append(dict(hook_input["tool_input"]))
        if isinstance(output, BaseException):
            raise output
        return output

    return callback


def decision(kind: str, reason: str = "", **extra: Any) -> dict[str, Any]:
    specific = {"hookEventName": "PreToolUse", "permissionDecision": kind, **extra}
    if reason:
        specific["permissionDecisionReason"] = reason
    return {"hookSpecificOutput": specific}


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        (None, "Bash", True),
        ("", "Bash", True),
        ("*", "Bash", True),
        ("Bash", "Bash", True),
        ("Bash", "BashOutput", False),
        ("Write|Edit", "Edit", True),
        ("Write|Edit", "Bash", False),
        ("mcp__tools__.*", "mcp__tools__refund", True),
        ("Notebook.*", "NotebookEdit", True),
        ("[", "Bash", False),
    ],
)
def test_matchers_match_as_the_cli_does(
    pattern: str | None, name: str, matches: bool
) -> None:
    assert matcher_matches(pattern, name) is matches


async def test_hooks_run_in_order_on_the_updated_input() -> None:
    seen: list[dict[str, Any]] = []
    matchers = [
        HookMatcher(
            matcher="Bash",
            hooks=[
                hook(decision("allow", updatedInput={"command": "ls -l"}), seen),
                hook({"hookSpecificOutput": {"hookEventName": "PreToolUse"}}, seen),
            ],
        ),
        HookMatcher(matcher="Write", hooks=[hook(decision("deny"))]),
        HookMatcher(
            hooks=[hook(decision("ask", "check it", additionalContext="ctx"), seen)]
        ),
    ]
    outcome = await run_app_hooks(matchers, INPUT, "t1")
    assert seen == [{"command": "ls"}, {"command": "ls -l"}, {"command": "ls -l"}]
    assert outcome.tool_input == {"command": "ls -l"}
    assert (outcome.decision, outcome.reason) == ("ask", "check it")
    assert outcome.additional_context == ["ctx"]


async def test_deny_wins_and_stops() -> None:
    seen: list[dict[str, Any]] = []
    matchers = [
        HookMatcher(hooks=[hook(decision("defer"))]),
        HookMatcher(hooks=[hook(decision("deny", "no"))]),
        HookMatcher(hooks=[hook(decision("allow"), seen)]),
    ]
    outcome = await run_app_hooks(matchers, INPUT, "t1")
    assert (outcome.decision, outcome.reason) == ("deny", "no")
    assert seen == []


async def test_defer_beats_ask_and_allow() -> None:
    matchers = [
        HookMatcher(
            hooks=[
                hook(decision("allow")),
                hook(decision("defer")),
                hook(decision("ask")),
            ]
        )
    ]
    assert (await run_app_hooks(matchers, INPUT, "t1")).decision == "defer"


async def test_legacy_and_common_fields() -> None:
    matchers = [
        HookMatcher(
            hooks=[
                hook(
                    {"decision": "approve", "systemMessage": "hi", "continue_": False}
                ),
                hook({"async_": True}),
                hook({"decision": "block", "reason": "legacy no"}),
            ]
        )
    ]
    outcome = await run_app_hooks(matchers, INPUT, "t1")
    assert (outcome.decision, outcome.reason) == ("deny", "legacy no")
    assert outcome.common == {"systemMessage": "hi", "continue_": False}


async def test_failures_count_as_no_decision_unless_blocking() -> None:
    failing = [HookMatcher(hooks=[hook(RuntimeError("boom")), hook(None)])]
    outcome = await run_app_hooks(failing, INPUT, "t1")
    assert outcome.decision is None
    blocking = [HookMatcher(hooks=[hook(RuntimeError("boom"))], on_failure="block")]
    outcome = await run_app_hooks(blocking, INPUT, "t1")
    assert outcome.decision == "deny" and "boom" in outcome.reason
    silent = [HookMatcher(hooks=[hook(None)], on_failure="block")]
    assert (await run_app_hooks(silent, INPUT, "t1")).decision == "deny"


async def test_a_slow_hook_times_out() -> None:
    async def slow(_input: Any, _id: str | None, _context: Any) -> Any:
        await asyncio.sleep(10)

    outcome = await run_app_hooks(
        [HookMatcher(hooks=[slow], timeout=0.01)], INPUT, "t1"
    )
    assert outcome.decision is None


def test_the_adapter_hook_outlasts_every_application_hook() -> None:
    assert matchers_timeout([]) == 60
    matchers = [
        HookMatcher(hooks=[hook({}), hook({})], timeout=5),
        HookMatcher(hooks=[hook({})]),
    ]
    assert matchers_timeout(matchers) == 60 + 10 + 60

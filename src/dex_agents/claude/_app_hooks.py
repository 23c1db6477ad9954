"""Runs the application's PreToolUse hooks inside the adapter's own hook.

CLI 2.1.327 does not apply `updatedInput` to a deferral: `deferred_tool_use.input`
and the transcript's `hook_deferred_tool` entry keep the model's original input,
also when another hook answered allow with `updatedInput` beside the deferring
one, and on resume every hook sees the original input again. The adapter promises
that what runs is exactly what was approved, so it must know the final input of
every call it defers. It therefore never hands the application's PreToolUse
matchers to the CLI: it runs them itself, in order, each seeing the input the
earlier ones produced, and decides on the result. The CLI dispatches matchers of
one event concurrently; running them in order is what makes "the final input"
well defined.

Decisions combine as the CLI combines them: deny over defer over ask over allow.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from claude_agent_sdk import HookInput, HookMatcher

AppDecision = Literal["allow", "ask", "defer", "deny"]

_RANK: dict[AppDecision | None, int] = {
    None: 0,
    "allow": 1,
    "ask": 2,
    "defer": 3,
    "deny": 4,
}
_DEFAULT_TIMEOUT_SECONDS = 60.0
"""The CLI's own default timeout for one hook callback."""
_PLAIN_MATCHER = re.compile(r"^[A-Za-z0-9_|]+$")


@dataclass(kw_only=True, slots=True)
class AppHookOutcome:
    """What the application's hooks said about one call."""

    tool_input: dict[str, Any]
    """The input after every hook's `updatedInput`."""
    decision: AppDecision | None = None
    reason: str = ""
    """The reason given with the strongest decision."""
    additional_context: list[str] = field(default_factory=lambda: [])
    common: dict[str, Any] = field(default_factory=lambda: {})
    """Top-level output fields to pass on (`systemMessage`, `continue_`, ...)."""


def matcher_matches(pattern: str | None, tool_name: str) -> bool:
    """Whether a PreToolUse matcher applies to `tool_name`, as the CLI decides.

    Empty, None and `*` match every tool; a plain `Write|Edit` list matches those
    names exactly; anything else is a regular expression searched in the name.
    """
    if pattern is None or pattern in ("", "*"):
        return True
    if _PLAIN_MATCHER.match(pattern):
        return tool_name in pattern.split("|")
    try:
        return re.search(pattern, tool_name) is not None
    except re.error:
        return False


def matchers_timeout(matchers: Sequence[HookMatcher]) -> float:
    """A timeout for the adapter's hook that leaves every application hook its own."""
    total = _DEFAULT_TIMEOUT_SECONDS
    for matcher in matchers:
        per_hook = matcher.timeout or _DEFAULT_TIMEOUT_SECONDS
        total += per_hook * len(matcher.hooks)
    return total


async def run_app_hooks(
    matchers: Sequence[HookMatcher],
    hook_input: Mapping[str, Any],
    tool_use_id: str,
) -> AppHookOutcome:
    """Run the matching hooks in order and combine their answers.

    A hook that raises, times out or returns something that is not a dict
    counts as no decision, unless its matcher says `on_failure="block"`: then
    it denies the call, as the CLI would.
    """
    tool_name = str(hook_input.get("tool_name", ""))
    outcome = AppHookOutcome(tool_input=dict(hook_input.get("tool_input") or {}))
    for matcher in matchers:
        if not matcher_matches(matcher.matcher, tool_name):
            continue
        for callback in matcher.hooks:
            current = {**hook_input, "tool_input": dict(outcome.tool_input)}
            try:
                async with asyncio.timeout(matcher.timeout or _DEFAULT_TIMEOUT_SECONDS):
                    # Typed as the SDK's output, but a hook may return anything.
                    output = cast(
                        object,
                        await callback(
                            cast(HookInput, current),
                            tool_use_id,
                            {"signal": None},
                        ),
                    )
            except Exception as e:
                if matcher.on_failure == "block":
                    _decide(outcome, "deny", f"a PreToolUse hook failed: {e!r}")
                    return outcome
                continue
            if not isinstance(output, dict):
                if matcher.on_failure == "block":
                    _decide(outcome, "deny", "a PreToolUse hook returned no output")
                    return outcome
                continue
            _apply(outcome, cast(dict[str, Any], output))
            if outcome.decision == "deny":
                return outcome
    return outcome


def _apply(outcome: AppHookOutcome, output: dict[str, Any]) -> None:
    if output.get("async_") or output.get("async"):
        # An async hook answers later and never decides the call.
        return
    found = output.get("hookSpecificOutput")
    specific: dict[str, Any] = (
        cast(dict[str, Any], found) if isinstance(found, dict) else {}
    )
    reason = str(specific.get("permissionDecisionReason") or output.get("reason") or "")
    decision = specific.get("permissionDecision")
    if decision is None:
        # The deprecated top-level form: `decision: "block"` denies, `approve` allows.
        legacy = output.get("decision")
        decision = {"block": "deny", "approve": "allow"}.get(str(legacy))
    if decision in ("allow", "ask", "defer", "deny"):
        _decide(outcome, decision, reason)
    updated = specific.get("updatedInput")
    if isinstance(updated, dict):
        outcome.tool_input = dict(cast(dict[str, Any], updated))
    context = specific.get("additionalContext")
    if isinstance(context, str) and context:
        outcome.additional_context.append(context)
    for key in ("systemMessage", "stopReason", "suppressOutput"):
        if key in output:
            outcome.common[key] = output[key]
    if output.get("continue_") is False or output.get("continue") is False:
        outcome.common["continue_"] = False


def _decide(outcome: AppHookOutcome, decision: AppDecision, reason: str) -> None:
    if _RANK[decision] > _RANK[outcome.decision]:
        outcome.decision = decision
        outcome.reason = reason

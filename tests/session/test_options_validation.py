"""Session options and tool policies refuse a bad value when they are built.

Each value below was accepted before and failed only in a running session (a
freeze, a dead Step, an approval that never waited). Now the constructor raises
`InvalidArgumentError` naming the option, quoting the value and saying the fix.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from typing import Any

import pytest

from dex_agents import InvalidArgumentError
from dex_agents.session import AgentSessionOptions, ToolPolicy
from dex_agents.session._notification import InterruptNotification
from dex_agents.session._options import (
    MAX_HOT_RESUME_WINDOW,
    MIN_CONTINUE_AS_NEW_AFTER_EVENTS,
)
from dex_agents.session._policy import TOOL_EFFECTS

_READ = ToolPolicy(effect="read")

# (option, bad value, text of the fix the message must say)
BAD_OPTIONS: list[tuple[str, object, str]] = [
    ("run_model_limit", timedelta(0), "timedelta(minutes=15)"),
    ("run_model_limit", timedelta(seconds=-1), "timedelta(minutes=15)"),
    ("run_model_limit", 900, "timedelta(seconds=900)"),
    ("tool_limit", timedelta(seconds=-5), "timedelta(minutes=10)"),
    ("tool_limit", timedelta(0), "timedelta(minutes=10)"),
    ("tool_limit", "10m", "timedelta(minutes=10)"),
    ("heartbeat_timeout", timedelta(seconds=-1), "timedelta(seconds=10)"),
    ("heartbeat_timeout", timedelta(0), "timedelta(seconds=10)"),
    ("retry_interval", timedelta(seconds=-1), "timedelta(seconds=1)"),
    ("retry_interval", timedelta(0), "timedelta(seconds=1)"),
    ("retry_interval", 1.5, "timedelta(seconds=1.5)"),
    ("run_model_attempts", 2.5, "run_model_attempts=3"),
    ("run_model_attempts", 0, "run_model_attempts=3"),
    ("run_model_attempts", -1, "run_model_attempts=3"),
    ("run_model_attempts", True, "run_model_attempts=3"),
    ("run_model_attempts", "3", "run_model_attempts=3"),
    ("tool_attempts", 2.5, "tool_attempts=3"),
    ("tool_attempts", 0, "tool_attempts=3"),
    ("tool_attempts", True, "tool_attempts=3"),
    ("notification_attempts", 1.5, "notification_attempts=5"),
    ("notification_attempts", 0, "notification_attempts=5"),
    ("notification_attempts", False, "notification_attempts=5"),
    ("spend_limit", "5", "spend_limit=5.0"),
    ("spend_limit", 0, "spend_limit=5.0"),
    ("spend_limit", -1.0, "spend_limit=5.0"),
    ("spend_limit", math.nan, "spend_limit=5.0"),
    ("spend_limit", math.inf, "spend_limit=5.0"),
    ("spend_limit", True, "spend_limit=5.0"),
    ("default_tool_effect", "write", "'idempotent_write'"),
    ("default_tool_effect", None, "'unclassified'"),
    ("tool_policies", {"look": "read"}, "`tool_policies['look']`"),
    ("tool_policies", {"look": "read"}, "use ToolPolicy(effect='read')"),
    (
        "tool_policies",
        {"look": None},
        'got NoneType None; use ToolPolicy(effect="read")',
    ),
    ("tool_policies", {"": _READ}, "got str ''; use {\"lookup\": ToolPolicy("),
    ("tool_policies", {1: _READ}, 'got int 1; use {"lookup": ToolPolicy('),
    ("tool_policies", ["look"], 'ToolPolicy(effect="read")'),
    ("tool_policies", None, 'ToolPolicy(effect="read")'),
    ("interrupt_deadline", 3600, "timedelta(seconds=3600)"),
    ("interrupt_deadline", "1h", "timedelta(hours=24)"),
    ("interrupt_deadline", timedelta(0), "None to wait without a deadline"),
    ("interrupt_deadline", timedelta(hours=-1), "None to wait without a deadline"),
    ("interrupt_reminder", 60, "timedelta(seconds=60)"),
    ("interrupt_reminder", timedelta(0), "None to send no reminders"),
    ("interrupt_reminder", timedelta(minutes=-1), "None to send no reminders"),
    ("hot_resume_window", 120, "timedelta(seconds=120)"),
    ("hot_resume_window", timedelta(seconds=-1), "timedelta(0) to resume"),
    ("hot_resume_window", MAX_HOT_RESUME_WINDOW * 2, "timedelta(minutes=2)"),
    ("max_parked_segments", "4", "max_parked_segments=4"),
    ("max_parked_segments", True, "max_parked_segments=4"),
    ("max_parked_segments", -1, "or 0 to resume every decision cold"),
    ("max_parked_segments", 2.0, "max_parked_segments=4"),
    ("continue_as_new_after_events", 0, "or None to continue as new"),
    ("continue_as_new_after_events", 3, "continue_as_new_after_events=10000"),
    ("continue_as_new_after_events", 9, "continue_as_new_after_events=10000"),
    ("continue_as_new_after_events", 100.5, "continue_as_new_after_events=10000"),
    ("continue_as_new_after_events", True, "continue_as_new_after_events=10000"),
    ("continue_as_new_after_events", "100", "continue_as_new_after_events=10000"),
    ("on_interrupt", "https://example.com/hook", "WebhookNotifier(url)"),
    ("on_interrupt", 5, "WebhookNotifier(url)"),
]


@pytest.mark.parametrize(
    ("option", "value", "fix"),
    BAD_OPTIONS,
    ids=[f"{option}={value!r}" for option, value, _ in BAD_OPTIONS],
)
def test_a_bad_session_option_is_refused_when_built(
    option: str, value: object, fix: str
) -> None:
    kwargs: dict[str, Any] = {option: value}
    with pytest.raises(InvalidArgumentError) as caught:
        AgentSessionOptions(**kwargs)
    err = caught.value
    assert err.argument == option
    message = str(err)
    assert option in message
    assert fix in message, message
    if not isinstance(value, dict):  # a bad entry of a dict is quoted, in `fix`
        assert f"got {type(value).__name__} {repr(value)[:40]}" in message, message


@pytest.mark.parametrize(
    ("option", "value", "fix"),
    BAD_OPTIONS,
    ids=[f"{option}={value!r}" for option, value, _ in BAD_OPTIONS],
)
def test_replace_refuses_the_same_bad_value(
    option: str, value: object, fix: str
) -> None:
    changes: dict[str, Any] = {option: value}
    with pytest.raises(InvalidArgumentError, match=option) as caught:
        dataclasses.replace(AgentSessionOptions(), **changes)
    assert caught.value.argument == option
    assert fix in str(caught.value)


def test_every_default_is_valid_and_a_valid_non_default_set_builds() -> None:
    defaults = AgentSessionOptions()
    # Each default passes the checks on its own, too.
    for f in dataclasses.fields(AgentSessionOptions):
        changes: dict[str, Any] = {f.name: getattr(defaults, f.name)}
        assert dataclasses.replace(defaults, **changes) == defaults

    async def notify(_notification: InterruptNotification) -> None:
        return None

    custom = AgentSessionOptions(
        tool_policies={
            "lookup": ToolPolicy(effect="read"),
            "refund": ToolPolicy(effect="idempotent_write", requires_approval=True),
        },
        default_tool_effect="non_idempotent_write",
        interrupt_deadline=timedelta(hours=24),
        run_model_limit=timedelta(minutes=5),
        run_model_attempts=1,
        tool_attempts=5,
        tool_limit=timedelta(seconds=30),
        heartbeat_timeout=timedelta(seconds=5),
        retry_interval=timedelta(milliseconds=200),
        spend_limit=5,
        continue_as_new_after_events=MIN_CONTINUE_AS_NEW_AFTER_EVENTS,
        on_interrupt=notify,
        interrupt_reminder=timedelta(hours=1),
        notification_attempts=1,
        hot_resume_window=timedelta(0),
        max_parked_segments=0,
    )
    assert custom.spend_limit == 5
    # replace keeps working on valid options, edge values included.
    assert dataclasses.replace(
        custom, hot_resume_window=MAX_HOT_RESUME_WINDOW, spend_limit=0.01
    ).hot_resume_window == (MAX_HOT_RESUME_WINDOW)
    assert (
        dataclasses.replace(custom, interrupt_deadline=None).interrupt_deadline is None
    )


BAD_POLICIES: list[tuple[str, dict[str, Any], str]] = [
    ("requires_approval", {"effect": "read", "requires_approval": "no"}, "=True"),
    ("requires_approval", {"effect": "read", "requires_approval": 1}, "=True"),
    ("requires_approval", {"effect": "read", "requires_approval": None}, "=True"),
    ("effect", {"effect": "write"}, "'non_idempotent_write'"),
    ("effect", {"effect": None}, "'read'"),
    ("effect", {"effect": 1}, "'read'"),
]


@pytest.mark.parametrize(
    ("field", "kwargs", "fix"),
    BAD_POLICIES,
    ids=[f"{kwargs}" for _, kwargs, _ in BAD_POLICIES],
)
def test_a_bad_tool_policy_is_refused_when_built(
    field: str, kwargs: dict[str, Any], fix: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        ToolPolicy(**kwargs)
    assert caught.value.argument == field
    message = str(caught.value)
    assert f"ToolPolicy.{field}" in message
    assert repr(kwargs[field]) in message
    assert fix in message, message


@pytest.mark.parametrize("effect", TOOL_EFFECTS)
@pytest.mark.parametrize("requires_approval", [False, True])
def test_every_valid_tool_policy_builds(effect: Any, requires_approval: bool) -> None:
    policy = ToolPolicy(effect=effect, requires_approval=requires_approval)
    assert policy.needs_approval == (
        requires_approval or effect in ("non_idempotent_write", "unclassified")
    )
    assert dataclasses.replace(policy, requires_approval=False).effect == effect

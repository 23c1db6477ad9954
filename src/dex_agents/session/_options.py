"""Session options: the knobs of the durable session, shared by every runner."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeAlias, cast

from .._errors import (
    InvalidArgumentError,
    InvalidOptionError,
    is_positive_number,
    must_be,
    shown,
)
from ._notification import InterruptNotification
from ._policy import TOOL_EFFECTS, ToolEffect, ToolPolicy, check_effect

InterruptNotifier: TypeAlias = Callable[[InterruptNotification], Awaitable[None]]
"""Tells someone that an approval waits (`dex_agents.notify.WebhookNotifier`, or your own)."""

MAX_HOT_RESUME_WINDOW = timedelta(minutes=30)
"""The longest `hot_resume_window`: past it, a decision resumes cold."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSessionOptions:
    """How a session treats tools, time and money.

    Raises:
        InvalidArgumentError: An option has the wrong type (a number where a
            `timedelta` goes, a float or bool where an int goes, a str effect
            where a `ToolPolicy` goes) or is out of range; `argument` names it
            and the message says the fix. `dataclasses.replace` checks again.
    """

    tool_policies: dict[str, ToolPolicy] = field(default_factory=lambda: {})
    """Policy per tool name; tools without one get `default_tool_effect`."""
    default_tool_effect: ToolEffect = "unclassified"
    """Effect of a tool without a policy; `unclassified` waits for approval."""
    interrupt_deadline: timedelta | None = None
    """How long an approval may wait; None waits for as long as it takes."""
    run_model_limit: timedelta = timedelta(minutes=15)
    """Limit for one model segment; a failed segment reruns whole."""
    run_model_attempts: int = 3
    """Attempts of one model segment before the turn fails with a note."""
    tool_attempts: int = 3
    """Attempts of an idempotent tool Step before its outcome is unknown."""
    tool_limit: timedelta = timedelta(minutes=10)
    """Limit for one attempt of a tool Step."""
    heartbeat_timeout: timedelta = timedelta(seconds=10)
    """How soon a crashed worker's Step is noticed and retried elsewhere."""
    retry_interval: timedelta = timedelta(seconds=1)
    """First delay between Step attempts (doubles each time)."""
    spend_limit: float | None = None
    """USD; checked once per segment, so one segment can overshoot it."""
    compaction: object | None = None
    """A compaction policy; runners that cannot compact reject it at definition."""
    continue_as_new_after_events: int | None = None
    """Continue as new past this many history events, besides Temporal's suggestion
    (at least `MIN_CONTINUE_AS_NEW_AFTER_EVENTS`)."""
    on_interrupt: InterruptNotifier | None = None
    """Called when an approval opens, is reminded (`interrupt_reminder`) or expires.

    It runs on a worker as its own Step, retried with backoff (up to
    `notification_attempts`; a retry repeats the notification's ID), while the
    session goes on: a failing receiver never blocks or fails it.
    """
    interrupt_reminder: timedelta | None = None
    """How often `on_interrupt` hears again of an approval that still waits; None: never."""
    notification_attempts: int = 5
    """Attempts of one notification's Step (`retry_interval` apart, doubling, at most a
    minute) before it is dropped."""

    hot_resume_window: timedelta = timedelta(seconds=120)
    """How long, after a segment defers a call, its resumed segment waits parked.

    A decision inside the window continues the parked CLI (about 0.1 s to the
    model's next answer instead of 0.5 s); a later one resumes cold, as every
    decision does with `timedelta(0)`. Nothing durable depends on the park.
    """
    max_parked_segments: int = 4
    """Parked segments of this flow one worker holds at once (about 200 MiB each);
    a deferral beyond it resumes cold. 0 parks none."""

    def __post_init__(self) -> None:
        check_tool_policies(self.tool_policies)
        check_effect(
            "default_tool_effect", self.default_tool_effect, owner="AgentSessionOptions"
        )
        _duration(
            "interrupt_deadline", self.interrupt_deadline, "wait without a deadline"
        )
        _duration("run_model_limit", self.run_model_limit)
        _count("run_model_attempts", self.run_model_attempts, minimum=1, example=3)
        _count("tool_attempts", self.tool_attempts, minimum=1, example=3)
        _duration("tool_limit", self.tool_limit)
        _duration("heartbeat_timeout", self.heartbeat_timeout)
        _duration("retry_interval", self.retry_interval)
        _spend_limit(self.spend_limit)
        if self.continue_as_new_after_events is not None:
            _count(
                "continue_as_new_after_events",
                self.continue_as_new_after_events,
                minimum=MIN_CONTINUE_AS_NEW_AFTER_EVENTS,
                example=10_000,
                fix="or None to continue as new only when Temporal suggests it",
            )
        if self.on_interrupt is not None and (
            not callable(self.on_interrupt) or is_sync_function(self.on_interrupt)
        ):
            # A plain `def` ran, then failed at `await None`: each attempt
            # (`notification_attempts`) sent its notification again.
            raise must_be(
                "on_interrupt",
                "an async callable that takes an InterruptNotification",
                self.on_interrupt,
                "define it with `async def`, or use "
                "on_interrupt=WebhookNotifier(url) (dex_agents.notify), or None",
            )
        _duration("interrupt_reminder", self.interrupt_reminder, "send no reminders")
        if self.interrupt_reminder is not None and self.on_interrupt is None:
            raise InvalidArgumentError(
                "interrupt_reminder",
                f"`interrupt_reminder={self.interrupt_reminder!r}` reminds through "
                "`on_interrupt`, which is None, so nobody would hear of it; set "
                "on_interrupt=WebhookNotifier(url) (dex_agents.notify) too, or "
                "interrupt_reminder=None",
            )
        _count(
            "notification_attempts", self.notification_attempts, minimum=1, example=5
        )
        _duration(
            "hot_resume_window",
            self.hot_resume_window,
            zero="resume every decision cold",
        )
        if self.hot_resume_window > MAX_HOT_RESUME_WINDOW:
            raise InvalidArgumentError(
                "hot_resume_window",
                f"`hot_resume_window` is at most {MAX_HOT_RESUME_WINDOW} (a parked "
                "CLI is kept warm, not durable), got "
                f"{shown(self.hot_resume_window)}; use timedelta(minutes=2), or "
                "timedelta(0) to resume every decision cold",
            )
        _count(
            "max_parked_segments",
            self.max_parked_segments,
            minimum=0,
            example=4,
            fix="or 0 to resume every decision cold",
        )


MIN_CONTINUE_AS_NEW_AFTER_EVENTS = 10
"""The smallest `continue_as_new_after_events`.

A new run's history holds 3 events when it first checks the limit, so a limit of
3 or less would continue an idle or waiting session as new forever; one Step adds
about 6 more, so from 10 on every run can take at least one Step first.
"""


def _duration(
    name: str, value: object, none_does: str | None = None, *, zero: str | None = None
) -> None:
    """Refuse a duration option `name` that is not a positive timedelta.

    `none_does` says what None means where None is allowed; `zero` what
    `timedelta(0)` means where zero is allowed.

    Raises:
        InvalidArgumentError: `value` is not a timedelta (nor an allowed None),
            or is negative, or zero where zero is not allowed.
    """
    if value is None and none_does is not None:
        return
    fix = _EXAMPLE_DURATION[name]
    if zero is not None:
        fix += f", or timedelta(0) to {zero}"
    if none_does is not None:
        fix += f", or None to {none_does}"
    if not isinstance(value, timedelta):
        if is_positive_number(value):
            fix = f"timedelta(seconds={value!r}) if you meant seconds"
        expected = "a datetime.timedelta" + (" or None" if none_does else "")
        raise must_be(name, expected, value, f"use {fix}")
    if value < timedelta(0) or (value == timedelta(0) and zero is None):
        expected = "positive" if zero is None else "zero or more"
        raise must_be(name, expected, value, f"use {fix}")


_EXAMPLE_DURATION = {
    "interrupt_deadline": "timedelta(hours=24)",
    "run_model_limit": "timedelta(minutes=15)",
    "tool_limit": "timedelta(minutes=10)",
    "heartbeat_timeout": "timedelta(seconds=10)",
    "retry_interval": "timedelta(seconds=1)",
    "interrupt_reminder": "timedelta(hours=1)",
    "hot_resume_window": "timedelta(minutes=2)",
}
"""A fitting value of each duration option, for the fix an error message names."""


def is_sync_function(handler: object) -> bool:
    """Whether `handler` is plainly a `def` (or an object whose `__call__` is one).

    Awaiting what such a callable returns fails on every call, long after it
    was passed, so it is refused where it is passed. A sync wrapper made with
    `functools.wraps` around an `async def` returns its coroutine and passes;
    a callable this cannot see into (a builtin) passes too.
    """
    target = handler
    while isinstance(target, functools.partial):
        target = cast("functools.partial[object]", target).func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        call = inspect.getattr_static(type(target), "__call__", None)
        if not inspect.isfunction(call):
            return False
        target = call
    # `unwrap` follows `functools.wraps` to the function a decorator wrapped.
    return not (
        inspect.iscoroutinefunction(target)
        or inspect.iscoroutinefunction(inspect.unwrap(target))
    )


def _count(
    name: str, value: object, *, minimum: int, example: int, fix: str = ""
) -> None:
    """Refuse a count option `name` that is not an int (bool is not) of `minimum` or more.

    `example` is a fitting value; `fix` what else may be passed instead.

    Raises:
        InvalidArgumentError: `value` is not an int, is a bool, or is below `minimum`.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return
    raise must_be(
        name,
        f"a whole number (int) of at least {minimum}",
        value,
        f"use {name}={example}{f', {fix}' if fix else ''}",
    )


def _spend_limit(value: object) -> None:
    """Refuse a `spend_limit` that is not None or a positive, finite number of USD.

    Raises:
        InvalidArgumentError: it is a bool, not a number, not finite, or not positive.
    """
    if value is None:
        return
    if not is_positive_number(value):
        raise must_be(
            "spend_limit",
            "a positive, finite number of USD (an int or float)",
            value,
            "use spend_limit=5.0, or None for no limit",
        )


def check_tool_policies(
    policies: object,
    *,
    fix: str = 'use {"lookup": ToolPolicy(effect="read")}',
    entry_fix: str = "",
    error: type[InvalidArgumentError | InvalidOptionError] = InvalidArgumentError,
) -> None:
    """Refuse `tool_policies` unless it maps non-empty tool names to `ToolPolicy`.

    `fix` is the fix of a value that is not a mapping, or of a bad key;
    `entry_fix` that of a value that is not a `ToolPolicy` (by default, the
    `ToolPolicy` of the bare effect it holds, else of "read"). Session options
    and the Claude agent definition check their `tool_policies` with it.

    Raises:
        InvalidArgumentError: (or `error`) it is not a mapping, or a key or
            value is not.
    """
    if not isinstance(policies, Mapping):
        raise must_be(
            "tool_policies",
            "a dict of tool names to ToolPolicy",
            policies,
            fix,
            error=error,
        )
    # isinstance leaves the item types unknown; each is checked here.
    items = cast("Mapping[object, object]", policies).items()
    for name, policy in items:
        if not isinstance(name, str) or not name:
            raise must_be(
                "tool_policies",
                "non-empty tool names (str)",
                name,
                fix,
                named="`tool_policies` keys",
                error=error,
            )
        if not isinstance(policy, ToolPolicy):
            hint = (
                f"ToolPolicy(effect={policy!r})"
                if isinstance(policy, str) and policy in TOOL_EFFECTS
                else 'ToolPolicy(effect="read")'
            )
            raise must_be(
                "tool_policies",
                "a ToolPolicy",
                policy,
                entry_fix or f"use {hint}",
                named=f"`tool_policies[{name!r}]`",
                error=error,
            )

"""Session options: the knobs of the durable session, shared by every runner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeAlias

from .._errors import InvalidArgumentError
from ._notification import InterruptNotification
from ._policy import ToolEffect, ToolPolicy

InterruptNotifier: TypeAlias = Callable[[InterruptNotification], Awaitable[None]]
"""Tells someone that an approval waits (`dex_agents.notify.WebhookNotifier`, or your own)."""

MAX_HOT_RESUME_WINDOW = timedelta(minutes=30)
"""The longest `hot_resume_window`: past it, a decision resumes cold."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSessionOptions:
    """How a session treats tools, time and money."""

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
    """Continue as new past this many history events, besides Temporal's suggestion."""
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
        if self.hot_resume_window < timedelta(0) or self.max_parked_segments < 0:
            raise InvalidArgumentError(
                "hot_resume_window",
                "`hot_resume_window` and `max_parked_segments` must not be negative, "
                f"got {self.hot_resume_window!r} and {self.max_parked_segments!r}; "
                "use timedelta(0) or 0 to resume every decision cold",
            )
        if self.hot_resume_window > MAX_HOT_RESUME_WINDOW:
            raise InvalidArgumentError(
                "hot_resume_window",
                f"`hot_resume_window` is at most {MAX_HOT_RESUME_WINDOW} (a parked "
                f"CLI is kept warm, not durable), got {self.hot_resume_window!r}",
            )
        _positive_or_none(
            "interrupt_reminder", self.interrupt_reminder, "send no reminders"
        )
        if self.notification_attempts < 1:
            raise InvalidArgumentError(
                "notification_attempts",
                "`notification_attempts` must be at least 1, got "
                f"{self.notification_attempts!r}",
            )
        if self.run_model_attempts < 1 or self.tool_attempts < 1:
            raise InvalidArgumentError(
                "run_model_attempts",
                "`run_model_attempts` and `tool_attempts` must be at least 1, got "
                f"{self.run_model_attempts!r} and {self.tool_attempts!r}",
            )
        _positive_or_none(
            "interrupt_deadline", self.interrupt_deadline, "wait without a deadline"
        )


def _positive_or_none(name: str, value: timedelta | None, none_does: str) -> None:
    """Refuse a duration option `name` that is zero or negative (None `none_does`).

    Raises:
        InvalidArgumentError: `value` is not None and not positive.
    """
    if value is not None and value <= timedelta(0):
        raise InvalidArgumentError(
            name, f"`{name}` must be positive, got {value!r}; use None to {none_does}"
        )

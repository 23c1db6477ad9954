"""What a session tells a person when a tool call waits for their approval.

A session that waits on an interrupt asks the engine to send an
`InterruptNotification` to a user-supplied callable. The engine makes that
call inside a Temporal activity, and Temporal retries a failed attempt with
backoff, so a receiver can see the same notification more than once: an
attempt can fail after the receiver already acted on it (its answer was lost,
or came after the timeout). `notification_id` is therefore derived only from
what the notification is about (the interrupt, the kind, the reminder number)
and never from the attempt or the clock: it is the same on every retry, and a
receiver deduplicates by it.

The call's input travels as `arguments_preview`, a JSON text clipped to a
bounded length, not as the arguments themselves. A notification is engine
input, recorded in the session's history; the session never carries
user-sized data through the engine, so a one-megabyte argument costs the
history at most a couple of kilobytes here. The preview is for a person
deciding; the full call stays readable from the session (`pending_interrupts`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

NotificationKind = Literal["created", "reminder", "expired"]
"""Why the session sends it: an interrupt opened, still waits, or ran out of time."""

NOTIFICATION_KINDS: tuple[NotificationKind, ...] = get_args(NotificationKind)

PREVIEW_LIMIT = 2000
"""The most characters of a call's JSON input a notification carries (plus "…")."""

_ELLIPSIS = "…"


def preview_arguments(
    arguments: Mapping[str, object], limit: int = PREVIEW_LIMIT
) -> str:
    r"""The call's input as JSON text, clipped so a notification stays small.

    Keys are sorted so the same input always gives the same preview (a retried
    notification is byte-for-byte the same), and non-ASCII text stays readable
    rather than escaped as `\uXXXX`, because a person reads it. Values JSON cannot
    encode are shown by their `str`, since a preview must never fail the
    notification it belongs to.

    Args:
        arguments: The tool call's input.
        limit: The most characters kept; a longer text is cut to `limit`
            characters followed by "…" (so at most `limit + 1`).

    Returns:
        The JSON text, or its first `limit` characters and "…".

    Raises:
        ValueError: `limit` is negative.
    """
    if limit < 0:
        raise ValueError(f"preview limit must be 0 or more, got {limit!r}")
    text = json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    return text[:limit] + _ELLIPSIS


@dataclass(frozen=True, kw_only=True, slots=True)
class InterruptNotification:
    """A tool call waits for a person's approval; tell someone who can give it.

    Every field is plain text (or a number) so the notification crosses the
    engine as small, replay-stable input and serializes to JSON as is. Times
    are ISO 8601 text, as the session recorded them, so a receiver needs no
    clock of the session's to read them.

    Attributes:
        kind: "created" when the interrupt opens, "reminder" while it still
            waits, "expired" when its deadline passed with no answer.
        session_id: The session that waits.
        flow_type: The flow (agent) the session runs, to route or label it.
        interrupt_id: The interrupt to resolve (`resolve_interrupt`).
        turn_id: The turn the call belongs to.
        tool_call_id: The model's ID of the waiting call.
        tool_name: The tool the model called.
        effect: The tool's effect (read, idempotent_write,
            non_idempotent_write, unclassified), to show what approving risks.
        reason: Why the call needs approval.
        arguments_preview: The call's input as JSON, clipped
            (`preview_arguments`): bounded, never the full input.
        created_at: When the interrupt opened.
        deadline: When it expires, or None when it waits as long as it takes.
        sent_at: When the session asked for this notification; it is the same
            on every retry, so it is not when the receiver got it.
        reminder: The reminder's number (1, 2, ...) for a "reminder"; 0 for
            "created" and "expired".
    """

    kind: NotificationKind
    session_id: str
    flow_type: str
    interrupt_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    effect: str
    reason: str
    arguments_preview: str
    created_at: str
    deadline: str | None
    sent_at: str
    reminder: int = 0

    def __post_init__(self) -> None:
        """Refuse a kind or reminder number that would make `notification_id` ambiguous."""
        if self.kind not in NOTIFICATION_KINDS:
            raise ValueError(
                f"unknown notification kind {self.kind!r}; use one of "
                f"{list(NOTIFICATION_KINDS)}"
            )
        if self.kind == "reminder":
            if self.reminder < 1:
                raise ValueError(
                    f"a reminder is numbered from 1, got reminder={self.reminder!r}"
                )
        elif self.reminder != 0:
            raise ValueError(
                f"only a reminder has a number; a {self.kind!r} notification has "
                f"reminder=0, got {self.reminder!r}"
            )

    @property
    def notification_id(self) -> str:
        """The notification's identity, the same on every retry: receivers deduplicate by it.

        Built from the interrupt, the kind and the reminder number only, so a
        retried attempt repeats it while each distinct notification (the
        opening, each reminder, the expiry) has its own.
        """
        base = f"{self.interrupt_id}/{self.kind}"
        return f"{base}/{self.reminder}" if self.kind == "reminder" else base

    def to_json(self) -> dict[str, object]:
        """The notification as a plain JSON object, in a stable key order.

        Returns:
            `notification_id` first, then every field in declaration order;
            every value is a str, an int or None.
        """
        return {
            "notification_id": self.notification_id,
            "kind": self.kind,
            "session_id": self.session_id,
            "flow_type": self.flow_type,
            "interrupt_id": self.interrupt_id,
            "turn_id": self.turn_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "effect": self.effect,
            "reason": self.reason,
            "arguments_preview": self.arguments_preview,
            "created_at": self.created_at,
            "deadline": self.deadline,
            "sent_at": self.sent_at,
            "reminder": self.reminder,
        }

"""A session's events as a client receives them: in order, once, superseded attempts marked.

The SSE `id` of each event is its cursor in the runtime store's event log.
A browser's `EventSource` sends the last one back as `Last-Event-ID` when it
reconnects, and the stream resumes after it, so a chain of connections
delivers every event exactly once, in cursor order.

**Superseded attempts.** A Step that runs again (a worker died mid-segment,
or an attempt failed) re-sends its events under a higher `attempt` of the
same `step_execution_id`; what the earlier attempt streamed (its text, its
tool calls) is not part of the session. When the first event of a newer
attempt arrives, the stream sends an `attempt_superseded` item (no `id`: it
is not an event of the log) naming the step and the new attempt: the client
drops what it showed of that step's lower attempts. Every event also says
`superseded: true` when this connection has already seen a newer attempt of
its step (a slow attempt that still writes after its replacement started).
A client that keeps text per `(step_execution_id, attempt)` and shows only
the highest attempt of each step needs nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ..session._events import EventRecord
from ..session._json import JsonObject
from ._feed import Feeds

IDLE_TYPES = frozenset(
    {
        "turn_completed",
        "turn_failed",
        "turn_cancelled",
        "interrupt_created",
        "session_ended",
    }
)
"""Events after which a session runs nothing until someone acts (`until=idle` stops there)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Superseded:
    """The attempts of `step_execution_id` below `attempt` are void: drop what they showed."""

    turn_id: str
    step_execution_id: str
    attempt: int

    def json(self) -> JsonObject:
        """The item as the stream sends it."""
        return {
            "type": "attempt_superseded",
            "turn_id": self.turn_id,
            "step_execution_id": self.step_execution_id,
            "attempt": self.attempt,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivered:
    """One event of the log as this connection delivers it."""

    event: EventRecord
    superseded: bool
    resolved_by: str | None = None
    """`interrupt_resolved` only: who decided, as the session recorded it with the
    resolution (None for a deadline, an end, or an answer that named nobody)."""

    def json(self) -> JsonObject:
        """The event as the stream sends it (the record's fields, flattened)."""
        e = self.event
        data = dict(e.data)
        if e.type == "interrupt_resolved":
            data["resolved_by"] = self.resolved_by
        return {
            "cursor": e.cursor,
            "type": e.type,
            "turn_id": e.turn_id,
            "step_execution_id": e.step_execution_id,
            "attempt": e.attempt,
            "seq": e.seq,
            "timestamp": e.timestamp,
            "superseded": self.superseded,
            "data": data,
        }


StreamItem = Delivered | Superseded


@dataclass
class Attempts:
    """The newest attempt this connection has seen of each step."""

    newest: dict[str, int] = field(default_factory=lambda: {})

    def see(self, event: EventRecord) -> tuple[bool, Superseded | None]:
        """Whether `event` is superseded, and the marker to send first if it starts a newer attempt."""
        step = event.step_execution_id
        known = self.newest.get(step)
        if known is None or event.attempt > known:
            self.newest[step] = event.attempt
            if event.attempt > 1:
                return False, Superseded(
                    turn_id=event.turn_id, step_execution_id=step, attempt=event.attempt
                )
            return False, None
        return event.attempt < known, None


async def session_stream(
    feeds: Feeds,
    session_id: str,
    *,
    after: int,
    until_idle: bool = False,
) -> AsyncIterator[StreamItem]:
    """The session's events after cursor `after`, marked, until the client leaves.

    `until_idle`: stop after the first event that leaves the session waiting
    (its turn answered, failed or cancelled, an approval or a new spend limit
    asked for, the session ended).
    """
    attempts = Attempts()
    async for event in feeds.follow(session_id, after):
        superseded, marker = attempts.see(event)
        if marker is not None:
            yield marker
        resolved_by = None
        if event.type == "interrupt_resolved":
            resolved_by = _decider(event)
        yield Delivered(event=event, superseded=superseded, resolved_by=resolved_by)
        if until_idle and event.type in IDLE_TYPES:
            return


def _decider(event: EventRecord) -> str | None:
    """Who made the decision `event` reports: the session records it in the event.

    An event published before the session recorded approvers has none.
    """
    by = event.data.get("resolved_by")
    return by if isinstance(by, str) else None

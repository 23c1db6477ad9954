"""Rules every runtime store applies the same way, shared so they cannot drift."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from pydantic import TypeAdapter

from .._errors import UserError
from ..session import EventRecord, JsonObject, StoredMessage
from ._protocols import SegmentConflictError

_EVENT = TypeAdapter(EventRecord)
MESSAGES = TypeAdapter(list[StoredMessage])
"""How every store encodes a segment's messages (JSON text)."""
_JSON_OBJECT = TypeAdapter(JsonObject)

EVENT_COLUMNS = "cursor, turn_id, step_execution_id, attempt, seq, type, data"
"""The columns a SQL store selects for `event_from_row`, in its order."""


def snapshot_version(snapshot: JsonObject) -> int:
    """The `version` of a snapshot projection; a missing one counts as 0."""
    version = snapshot.get("version", 0)
    # bool is an int subclass, but `True` as a version is a bug, not version 1.
    if not isinstance(version, int) or isinstance(version, bool):
        raise UserError(
            f"snapshot `version` must be an int, got {version!r}; "
            "publish the snapshot's integer version counter"
        )
    return version


def order_chain(
    session_id: str, head_id: str, parents: dict[str, str | None]
) -> list[str]:
    """Segment IDs from the root to `head_id`, following `parents`.

    Raises:
        KeyError: A segment on the chain was never written.
        ValueError: The chain loops, which only corrupt parent links can cause.
    """
    order: list[str] = []
    seen: set[str] = set()
    current: str | None = head_id
    while current is not None:
        if current not in parents:
            raise KeyError(f"session {session_id!r} has no segment {current!r}")
        if current in seen:
            raise ValueError(
                f"the segment chain of session {session_id!r} loops at {current!r}"
            )
        seen.add(current)
        order.append(current)
        current = parents[current]
    order.reverse()
    return order


def event_from_row(session_id: str, row: Sequence[Any]) -> EventRecord:
    """The event of one `EVENT_COLUMNS` row, its `data` stored as JSON text."""
    cursor, turn_id, step_execution_id, attempt, seq, type_, data = row
    return _EVENT.validate_python(
        {
            "session_id": session_id,
            "cursor": cursor,
            "turn_id": turn_id,
            "step_execution_id": step_execution_id,
            "attempt": attempt,
            "seq": seq,
            "type": type_,
            "data": _JSON_OBJECT.validate_json(data),
        }
    )


async def poll_events(
    read_events: Callable[..., Awaitable[list[EventRecord]]],
    session_id: str,
    after: int,
    poll_interval: float,
) -> AsyncIterator[EventRecord]:
    """Follow a session's events by polling `read_events`, until the consumer stops.

    Writers may be other processes or hosts, so followers poll the store
    itself rather than wait on anything in this process.
    """
    cursor = after
    while True:
        batch = await read_events(session_id, after=cursor)
        for event in batch:
            cursor = event.cursor
            yield event
        if not batch:
            await asyncio.sleep(poll_interval)


def check_same_segment(
    session_id: str,
    segment_id: str,
    stored: tuple[str | None, str | bytes],
    parent_id: str | None,
    body: str | bytes,
) -> None:
    """Allow rewriting a segment only with what it holds (a retried write).

    The bodies are compared decoded, so JSON-equal content is equal.

    Raises:
        SegmentConflictError: The stored parent or messages differ.
    """
    stored_parent, stored_body = stored
    if stored_parent != parent_id or MESSAGES.validate_json(
        stored_body
    ) != MESSAGES.validate_json(body):
        raise SegmentConflictError(
            f"segment {segment_id!r} of session {session_id!r} was already "
            "written with different content; segments are immutable, so "
            "write a new segment ID (include the attempt)"
        )


def chain_messages(
    session_id: str, head_id: str, rows: Iterable[Sequence[Any]]
) -> list[StoredMessage]:
    """The messages of the chain ending at `head_id`, oldest segment first.

    `rows` are `(segment_id, parent_id, body)` of at least the chain's
    segments, in any order; the order comes from the parent links.
    """
    parents: dict[str, str | None] = {}
    bodies: dict[str, str] = {}
    for segment_id, parent, body in rows:
        parents[segment_id] = parent
        bodies[segment_id] = body
    messages: list[StoredMessage] = []
    for segment_id in order_chain(session_id, head_id, parents):
        messages.extend(MESSAGES.validate_json(bodies[segment_id]))
    return messages

"""Rules every runtime store applies the same way, shared so they cannot drift."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Protocol

from pydantic import TypeAdapter

from .._errors import UserError
from ..session import StoredMessage
from ..session._events import EventRecord
from ..session._json import JsonObject
from ._protocols import BlobConflictError, SegmentConflictError

_EVENT = TypeAdapter(EventRecord)
MESSAGES = TypeAdapter(list[StoredMessage])
"""How every store encodes a segment's messages (JSON text)."""
JSON_OBJECT = TypeAdapter(JsonObject)
"""How every store encodes a JSON object (an event's data, a turn, a snapshot)."""

_EVENT_FIELDS = {
    "turn_id": "TEXT",
    "step_execution_id": "TEXT",
    "attempt": "INTEGER",
    "seq": "INTEGER",
    "type": "TEXT",
    "data": "TEXT",
}
"""The `events` table's columns after `cursor` and their SQL types (the same in
both dialects), in the order of `event_from_row` and `event_values`."""

EVENT_COLUMNS = ", ".join(["cursor", *_EVENT_FIELDS])
"""The columns a SQL store selects for `event_from_row`, in its order."""
EVENT_FIELD_DEFINITIONS = ", ".join(
    f"{name} {kind} NOT NULL" for name, kind in _EVENT_FIELDS.items()
)
"""The definitions of the `events` table's columns after `cursor`."""


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


def at_least_one(name: str, value: int | None) -> None:
    """Refuse a count (a page size, a number of segments) below 1.

    Zero or a negative count is a caller's bug, not a request for nothing; an
    empty answer would hide it.

    Raises:
        UserError: `value` is not None and below 1.
    """
    if value is not None and value < 1:
        raise UserError(f"`{name}` must be at least 1, got {value!r}")


def unknown_cursor(session_id: str | None) -> UserError:
    """The error for a `list_snapshots(before=...)` naming no listed session."""
    return UserError(
        f"`before={session_id!r}` names no session in this store's list; pass the "
        "`session_id` of the last snapshot of the previous page, or None for the first"
    )


def turn_number(number: object) -> int:
    """A turn log key, checked: turns count from 1.

    Raises:
        UserError: `number` is not an int or is below 1.
    """
    # bool is an int subclass, but `True` as a turn number is a bug, not turn 1.
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise UserError(
            f"turn number must be an int of at least 1, got {number!r}; "
            "turns are numbered 1, 2, ... in the order they finish"
        )
    return number


def blob_digest(data: bytes) -> str:
    """The sha256 hex digest stored beside a blob.

    A retried write is checked against the digest, so it never reads back
    (or compares) megabytes of stored bytes.
    """
    return hashlib.sha256(data).hexdigest()


def check_same_blob(
    session_id: str, blob_id: str, stored_digest: str, digest: str
) -> None:
    """Allow rewriting a blob only with the bytes it holds (a retried write).

    Raises:
        BlobConflictError: The stored bytes differ.
    """
    if stored_digest != digest:
        raise BlobConflictError(
            f"blob {blob_id!r} of session {session_id!r} was already written "
            "with different bytes; blobs are immutable, so derive the blob ID "
            "from the content"
        )


def not_in_this_store(session_id: str, what: str) -> str:
    """Why a session's own data is missing from a store: the store is not its.

    A segment or blob that the session names was written before it was named,
    so a store without it is another deployment's (or a fresh one): retrying
    cannot help, and the message says how to point everything at one store.
    """
    return (
        f"session {session_id!r} names {what}, which this runtime store does not "
        "have: its earlier turns ran with another store. Run every client and "
        "worker of the session with that store (the same SQLite file or "
        "PostgreSQL database), or start a new session with another ID"
    )


def missing_blob(session_id: str, blob_id: str) -> KeyError:
    """The error of reading a blob that was never written."""
    return KeyError(f"session {session_id!r} has no blob {blob_id!r}")


def order_chain(
    session_id: str,
    head_id: str,
    parents: dict[str, str | None],
    max_segments: int | None = None,
) -> list[str]:
    """Segment IDs from the root to `head_id`, following `parents`.

    With `max_segments`, only the newest that many: the walk stops there, so
    the older segments need not be in `parents` (a bounded read never fetched
    them) and are not missing.

    Raises:
        KeyError: A segment on the (possibly cut) chain was never written.
        ValueError: The chain loops, which only corrupt parent links can cause.
    """
    order: list[str] = []
    seen: set[str] = set()
    current: str | None = head_id
    while current is not None and (max_segments is None or len(order) < max_segments):
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
            "data": JSON_OBJECT.validate_json(data),
        }
    )


def event_values(event: EventRecord) -> tuple[str, str, int, int, str, str]:
    """The `EVENT_COLUMNS` after `cursor` of `event`, its `data` as JSON text."""
    return (
        event.turn_id,
        event.step_execution_id,
        event.attempt,
        event.seq,
        event.type,
        JSON_OBJECT.dump_json(event.data).decode(),
    )


class _EventReader(Protocol):
    async def read_events(
        self, session_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[EventRecord]: ...


class PollsEvents:
    """A store's `follow_events`, which polls the store's own `read_events`.

    Writers may be other processes or hosts, so followers poll the store
    itself rather than wait on anything in this process.
    """

    async def follow_events(
        self: _EventReader,
        session_id: str,
        *,
        after: int = 0,
        poll_interval: float = 0.01,
    ) -> AsyncIterator[EventRecord]:
        """Yield events after `after` as they are appended, until the consumer stops."""
        cursor = after
        while True:
            batch = await self.read_events(session_id, after=cursor)
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
    session_id: str,
    head_id: str,
    rows: Iterable[Sequence[Any]],
    max_segments: int | None = None,
) -> list[StoredMessage]:
    """The messages of the chain ending at `head_id`, oldest segment first.

    `rows` are `(segment_id, parent_id, body)` of at least the chain's
    segments (its newest `max_segments` when given), in any order and possibly
    repeated; the order comes from the parent links.
    """
    parents: dict[str, str | None] = {}
    bodies: dict[str, str] = {}
    for segment_id, parent, body in rows:
        parents[segment_id] = parent
        bodies[segment_id] = body
    messages: list[StoredMessage] = []
    for segment_id in order_chain(session_id, head_id, parents, max_segments):
        messages.extend(MESSAGES.validate_json(bodies[segment_id]))
    return messages

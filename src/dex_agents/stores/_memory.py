"""An in-process runtime store for unit tests and single-process experiments.

It keeps every value as JSON text (blobs as immutable bytes), like the SQLite
store, so callers get fresh copies (mutating a returned message never changes
the store) and anything that would not survive a real store's round trip
fails here too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from pydantic import TypeAdapter

from .._errors import UserError
from ..session import JsonObject, StoredMessage
from ..session._events import EventRecord
from ._rules import (
    MESSAGES,
    PollsEvents,
    at_least_one,
    blob_digest,
    check_same_blob,
    check_same_segment,
    missing_blob,
    order_chain,
    snapshot_version,
    turn_number,
    unknown_cursor,
)

_EVENT = TypeAdapter(EventRecord)
_JSON_OBJECT = TypeAdapter(JsonObject)


class InMemoryRuntimeStore(PollsEvents):
    """`RuntimeStore` held in this process's memory; nothing survives it."""

    def __init__(self) -> None:
        self._segments: dict[tuple[str, str], tuple[str | None, bytes]] = {}
        self._events: dict[str, list[bytes]] = {}
        self._snapshots: dict[str, tuple[int, float, bytes]] = {}
        self._blobs: dict[tuple[str, str], tuple[str, bytes]] = {}
        self._turns: dict[str, dict[int, bytes]] = {}
        self._last_update = 0.0
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise UserError("the in-memory runtime store is closed")

    async def put_segment(
        self,
        session_id: str,
        segment_id: str,
        parent_id: str | None,
        messages: Sequence[StoredMessage],
    ) -> None:
        """Write one immutable segment; see `RuntimeStore.put_segment`."""
        self._check_open()
        body = MESSAGES.dump_json(list(messages))
        existing = self._segments.get((session_id, segment_id))
        if existing is None:
            self._segments[session_id, segment_id] = (parent_id, body)
            return
        check_same_segment(session_id, segment_id, existing, parent_id, body)

    async def read_segment(
        self, session_id: str, segment_id: str
    ) -> list[StoredMessage]:
        """The messages of one segment; `KeyError` if it was never written."""
        self._check_open()
        try:
            _, body = self._segments[session_id, segment_id]
        except KeyError:
            raise KeyError(
                f"session {session_id!r} has no segment {segment_id!r}"
            ) from None
        return MESSAGES.validate_json(body)

    async def read_transcript(
        self, session_id: str, head_id: str | None, *, max_segments: int | None = None
    ) -> list[StoredMessage]:
        """The chain ending at `head_id`, oldest first; see `RuntimeStore.read_transcript`."""
        self._check_open()
        at_least_one("max_segments", max_segments)
        if head_id is None:
            return []
        parents = {
            segment_id: parent
            for (session, segment_id), (parent, _) in self._segments.items()
            if session == session_id
        }
        messages: list[StoredMessage] = []
        for segment_id in order_chain(session_id, head_id, parents, max_segments):
            messages.extend(await self.read_segment(session_id, segment_id))
        return messages

    async def put_blob(self, session_id: str, blob_id: str, data: bytes) -> None:
        """Write one immutable blob; see `RuntimeStore.put_blob`."""
        self._check_open()
        # bytes() copies a bytearray, so the caller's later edits cannot reach
        # the store; it is free for bytes, which are immutable already.
        data = bytes(data)
        digest = blob_digest(data)
        existing = self._blobs.get((session_id, blob_id))
        if existing is None:
            self._blobs[session_id, blob_id] = (digest, data)
            return
        check_same_blob(session_id, blob_id, existing[0], digest)

    async def get_blob(self, session_id: str, blob_id: str) -> bytes:
        """The bytes of one blob; `KeyError` if it was never written."""
        self._check_open()
        try:
            return self._blobs[session_id, blob_id][1]
        except KeyError:
            raise missing_blob(session_id, blob_id) from None

    async def put_turn(self, session_id: str, number: int, turn: JsonObject) -> None:
        """Record (or replace) finished turn `number`; see `RuntimeStore.put_turn`."""
        self._check_open()
        self._turns.setdefault(session_id, {})[turn_number(number)] = (
            _JSON_OBJECT.dump_json(turn)
        )

    async def read_turns(
        self, session_id: str, *, before: int | None = None, limit: int = 20
    ) -> list[JsonObject]:
        """Turns numbered below `before`, newest first, at most `limit`."""
        self._check_open()
        at_least_one("limit", limit)
        turns = self._turns.get(session_id, {})
        numbers = sorted(
            (n for n in turns if before is None or n < before), reverse=True
        )
        return [_JSON_OBJECT.validate_json(turns[n]) for n in numbers[:limit]]

    async def count_turns(self, session_id: str) -> int:
        """How many turns the session has recorded."""
        self._check_open()
        return len(self._turns.get(session_id, {}))

    async def append_events(self, events: Sequence[EventRecord]) -> list[int]:
        """Append events and return their cursors; see `RuntimeStore.append_events`."""
        self._check_open()
        cursors: list[int] = []
        for event in events:
            log = self._events.setdefault(event.session_id, [])
            cursor = len(log) + 1
            log.append(_EVENT.dump_json(replace(event, cursor=cursor)))
            cursors.append(cursor)
        return cursors

    async def read_events(
        self, session_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[EventRecord]:
        """Events of `session_id` with a cursor above `after`, in cursor order."""
        self._check_open()
        # Cursor n sits at index n - 1: the log is never trimmed.
        start = max(after, 0)
        log = self._events.get(session_id, [])
        return [_EVENT.validate_json(raw) for raw in log[start : start + max(limit, 0)]]

    async def put_snapshot(self, session_id: str, snapshot: JsonObject) -> None:
        """Replace the session's projection unless it holds a higher `version`."""
        self._check_open()
        version = snapshot_version(snapshot)
        current = self._snapshots.get(session_id)
        if current is not None and current[0] > version:
            return
        # Strictly increasing, so the newest-first order has no ties.
        self._last_update = max(time.time(), self._last_update + 1e-6)
        self._snapshots[session_id] = (
            version,
            self._last_update,
            _JSON_OBJECT.dump_json(snapshot),
        )

    async def get_snapshot(self, session_id: str) -> JsonObject | None:
        """The last projection of the session, or None."""
        self._check_open()
        current = self._snapshots.get(session_id)
        return None if current is None else _JSON_OBJECT.validate_json(current[2])

    async def list_snapshots(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[JsonObject]:
        """A page of projections, newest first; see `RuntimeStore.list_snapshots`."""
        self._check_open()
        at_least_one("limit", limit)
        bound = float("inf")
        if before is not None:
            if before not in self._snapshots:
                raise unknown_cursor(before)
            bound = self._snapshots[before][1]
        newest_first = sorted(
            (s for s in self._snapshots.values() if s[1] < bound),
            key=lambda s: s[1],
            reverse=True,
        )
        page: list[JsonObject] = []
        for _, _, body in newest_first:
            snapshot = _JSON_OBJECT.validate_json(body)
            if status is None or snapshot.get("status") == status:
                page.append(snapshot)
            if limit is not None and len(page) == limit:
                break
        return page

    async def close(self) -> None:
        """Mark the store closed; its contents are dropped with it."""
        self._closed = True
        self._segments.clear()
        self._events.clear()
        self._snapshots.clear()
        self._blobs.clear()
        self._turns.clear()

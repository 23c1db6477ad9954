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
from ..session._events import EventRecord
from ..session._json import JsonObject
from ._base import StoreBase
from ._rules import JSON_OBJECT, blob_digest, check_same_blob

_EVENT = TypeAdapter(EventRecord)


class InMemoryRuntimeStore(StoreBase):
    """`RuntimeStore` held in this process's memory; nothing survives it."""

    def __init__(self) -> None:
        self._segments: dict[tuple[str, str], tuple[str | None, str]] = {}
        self._events: dict[str, list[bytes]] = {}
        self._snapshots: dict[str, tuple[int, float, str]] = {}
        self._blobs: dict[tuple[str, str], tuple[str, bytes]] = {}
        self._turns: dict[str, dict[int, str]] = {}
        self._last_update = 0.0
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise UserError("the in-memory runtime store is closed")

    async def _add_segment(
        self, session_id: str, segment_id: str, parent_id: str | None, body: str
    ) -> tuple[str | None, str] | None:
        existing = self._segments.get((session_id, segment_id))
        if existing is None:
            self._segments[session_id, segment_id] = (parent_id, body)
        return existing

    async def _segment_body(self, session_id: str, segment_id: str) -> str | None:
        segment = self._segments.get((session_id, segment_id))
        return None if segment is None else segment[1]

    async def _chain_rows(
        self, session_id: str, head_id: str, max_segments: int | None
    ) -> list[tuple[str, str | None, str]]:
        # Every segment of the session: the parent links pick out the chain.
        return [
            (segment_id, parent, body)
            for (session, segment_id), (parent, body) in self._segments.items()
            if session == session_id
        ]

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

    async def _blob_data(self, session_id: str, blob_id: str) -> bytes | None:
        blob = self._blobs.get((session_id, blob_id))
        return None if blob is None else blob[1]

    async def _set_turn(self, session_id: str, number: int, body: str) -> None:
        self._turns.setdefault(session_id, {})[number] = body

    async def _turn_bodies(
        self, session_id: str, before: int | None, limit: int
    ) -> list[str]:
        turns = self._turns.get(session_id, {})
        numbers = sorted(
            (n for n in turns if before is None or n < before), reverse=True
        )
        return [turns[n] for n in numbers[:limit]]

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

    async def _set_snapshot(self, session_id: str, version: int, body: str) -> None:
        current = self._snapshots.get(session_id)
        if current is not None and current[0] > version:
            return
        # Strictly increasing, so the newest-first order has no ties.
        self._last_update = max(time.time(), self._last_update + 1e-6)
        self._snapshots[session_id] = (version, self._last_update, body)

    async def _snapshot_body(self, session_id: str) -> str | None:
        current = self._snapshots.get(session_id)
        return None if current is None else current[2]

    async def _snapshot_page(
        self, status: str | None, limit: int | None, before: str | None
    ) -> list[JsonObject] | None:
        bound = float("inf")
        if before is not None:
            if before not in self._snapshots:
                return None
            bound = self._snapshots[before][1]
        newest_first = sorted(
            (s for s in self._snapshots.values() if s[1] < bound),
            key=lambda s: s[1],
            reverse=True,
        )
        page: list[JsonObject] = []
        for _, _, body in newest_first:
            snapshot = JSON_OBJECT.validate_json(body)
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

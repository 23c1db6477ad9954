"""The `RuntimeStore` methods that every store implements the same way.

Every store encodes values as the same JSON text, checks its arguments the
same way and raises the same errors; only moving rows differs. So those
methods live here once, each over a smaller primitive that a store implements
(`_add_segment`, `_segment_body`, ...), and the rules cannot drift between
stores. The statements that read the same in SQLite and PostgreSQL live here
too (`SQLStoreBase`), written once with the dialect's placeholder and table
prefix.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from ..session import StoredMessage
from ..session._events import EventRecord
from ..session._json import JsonObject
from ._rules import (
    EVENT_COLUMNS,
    JSON_OBJECT,
    MESSAGES,
    PollsEvents,
    at_least_one,
    chain_messages,
    check_same_segment,
    event_from_row,
    missing_blob,
    snapshot_version,
    turn_number,
    unknown_cursor,
)

Messages: TypeAlias = Sequence[StoredMessage]
"""The messages of one segment, as `put_segment` takes them."""
SnapshotPage: TypeAlias = list[JsonObject]
"""One page of `list_snapshots`, newest first."""


class StoreBase(PollsEvents, ABC):
    """Segments, blobs, turns and snapshots over a store's row primitives.

    A store adds `put_blob`, `count_turns`, `append_events`, `read_events` and
    `close`, whose work differs too much between stores to share.
    """

    def _check_open(self) -> None:
        """Refuse a call before checking its arguments once the store is closed.

        The SQL stores check when they reach their database, so by default
        this does nothing.
        """

    # -- primitives --------------------------------------------------------

    @abstractmethod
    async def _add_segment(
        self, session_id: str, segment_id: str, parent_id: str | None, body: str
    ) -> tuple[str | None, str] | None:
        """Insert the segment unless its ID is taken: None, or the stored `(parent_id, body)`."""

    @abstractmethod
    async def _segment_body(self, session_id: str, segment_id: str) -> str | None:
        """The messages of one segment as JSON text, or None."""

    @abstractmethod
    async def _chain_rows(
        self, session_id: str, head_id: str, max_segments: int | None
    ) -> Iterable[Sequence[Any]]:
        """`(segment_id, parent_id, body)` rows holding the chain's segments (see `chain_messages`)."""

    @abstractmethod
    async def _blob_data(self, session_id: str, blob_id: str) -> bytes | None:
        """The bytes of one blob, or None."""

    @abstractmethod
    async def _set_turn(self, session_id: str, number: int, body: str) -> None:
        """Insert or replace turn `number` (already checked) as JSON text."""

    @abstractmethod
    async def _turn_bodies(
        self, session_id: str, before: int | None, limit: int
    ) -> list[str]:
        """The JSON text of the turns below `before`, newest first, at most `limit`."""

    @abstractmethod
    async def _set_snapshot(self, session_id: str, version: int, body: str) -> None:
        """Replace the projection unless the stored one has a higher `version`."""

    @abstractmethod
    async def _snapshot_body(self, session_id: str) -> str | None:
        """The JSON text of the session's projection, or None."""

    @abstractmethod
    async def _snapshot_page(
        self, status: str | None, limit: int | None, before: str | None
    ) -> SnapshotPage | None:
        """A page of `list_snapshots` (`limit` checked); None when `before` is not listed."""

    # -- segments ----------------------------------------------------------

    async def put_segment(
        self,
        session_id: str,
        segment_id: str,
        parent_id: str | None,
        messages: Messages,
    ) -> None:
        """Write one immutable segment; see `RuntimeStore.put_segment`."""
        self._check_open()
        body = MESSAGES.dump_json(list(messages)).decode()
        stored = await self._add_segment(session_id, segment_id, parent_id, body)
        if stored is not None:
            check_same_segment(session_id, segment_id, stored, parent_id, body)

    async def read_segment(
        self, session_id: str, segment_id: str
    ) -> list[StoredMessage]:
        """The messages of one segment; `KeyError` if it was never written."""
        self._check_open()
        body = await self._segment_body(session_id, segment_id)
        if body is None:
            raise KeyError(f"session {session_id!r} has no segment {segment_id!r}")
        return MESSAGES.validate_json(body)

    async def read_transcript(
        self, session_id: str, head_id: str | None, *, max_segments: int | None = None
    ) -> list[StoredMessage]:
        """The chain ending at `head_id`, oldest first; see `RuntimeStore.read_transcript`."""
        self._check_open()
        at_least_one("max_segments", max_segments)
        if head_id is None:
            return []
        rows = await self._chain_rows(session_id, head_id, max_segments)
        return chain_messages(session_id, head_id, rows, max_segments)

    # -- blobs -------------------------------------------------------------

    async def get_blob(self, session_id: str, blob_id: str) -> bytes:
        """The bytes of one blob; `KeyError` if it was never written."""
        self._check_open()
        data = await self._blob_data(session_id, blob_id)
        if data is None:
            raise missing_blob(session_id, blob_id)
        return data

    # -- turns -------------------------------------------------------------

    async def put_turn(self, session_id: str, number: int, turn: JsonObject) -> None:
        """Record (or replace) finished turn `number`; see `RuntimeStore.put_turn`."""
        self._check_open()
        number = turn_number(number)
        await self._set_turn(session_id, number, JSON_OBJECT.dump_json(turn).decode())

    async def read_turns(
        self, session_id: str, *, before: int | None = None, limit: int = 20
    ) -> list[JsonObject]:
        """Turns numbered below `before`, newest first, at most `limit`."""
        self._check_open()
        at_least_one("limit", limit)
        bodies = await self._turn_bodies(session_id, before, limit)
        return [JSON_OBJECT.validate_json(body) for body in bodies]

    # -- snapshots ---------------------------------------------------------

    async def put_snapshot(self, session_id: str, snapshot: JsonObject) -> None:
        """Replace the session's projection unless it holds a higher `version`."""
        self._check_open()
        version = snapshot_version(snapshot)
        body = JSON_OBJECT.dump_json(snapshot).decode()
        await self._set_snapshot(session_id, version, body)

    async def get_snapshot(self, session_id: str) -> JsonObject | None:
        """The last projection of the session, or None."""
        self._check_open()
        body = await self._snapshot_body(session_id)
        return None if body is None else JSON_OBJECT.validate_json(body)

    async def list_snapshots(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> SnapshotPage:
        """A page of projections, newest first; see `RuntimeStore.list_snapshots`."""
        self._check_open()
        at_least_one("limit", limit)
        page = await self._snapshot_page(status, limit, before)
        if page is None:
            raise unknown_cursor(before)
        return page


class SQLStoreBase(StoreBase):
    """The primitives whose statements SQLite and PostgreSQL share.

    A dialect gives its placeholder (`_mark`), its tables' prefix (`_p`) and
    two runners, `_rows` and `_write`, that take statements in that dialect.
    """

    _mark: str
    _p: str

    @abstractmethod
    async def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Every row `sql` answers."""

    @abstractmethod
    async def _write(self, sql: str, params: Sequence[Any]) -> None:
        """Run one statement that answers no rows, committed at once."""

    async def _first(self, sql: str, params: Sequence[Any]) -> Any:
        """The first column of the first row `sql` answers, or None."""
        rows = await self._rows(sql, params)
        return rows[0][0] if rows else None

    async def _segment_body(self, session_id: str, segment_id: str) -> str | None:
        m = self._mark
        return await self._first(
            f"SELECT body FROM {self._p}segments"
            f" WHERE session_id = {m} AND segment_id = {m}",
            (session_id, segment_id),
        )

    async def _set_turn(self, session_id: str, number: int, body: str) -> None:
        m = self._mark
        await self._write(
            f"INSERT INTO {self._p}turns VALUES ({m}, {m}, {m})"
            " ON CONFLICT (session_id, number) DO UPDATE SET body = excluded.body",
            (session_id, number, body),
        )

    async def _turn_bodies(
        self, session_id: str, before: int | None, limit: int
    ) -> list[str]:
        m = self._mark
        # Two statements rather than `(? IS NULL OR number < ?)`, which the
        # planner cannot turn into a range of the primary key.
        if before is None:
            below, params = "", (session_id, limit)
        else:
            below, params = f" AND number < {m}", (session_id, before, limit)
        rows = await self._rows(
            f"SELECT body FROM {self._p}turns WHERE session_id = {m}{below}"
            f" ORDER BY number DESC LIMIT {m}",
            params,
        )
        return [body for (body,) in rows]

    async def count_turns(self, session_id: str) -> int:
        """How many turns the session has recorded."""
        return int(
            await self._first(
                f"SELECT count(*) FROM {self._p}turns WHERE session_id = {self._mark}",
                (session_id,),
            )
        )

    async def read_events(
        self, session_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[EventRecord]:
        """Events of `session_id` with a cursor above `after`, in cursor order."""
        m = self._mark
        rows = await self._rows(
            f"SELECT {EVENT_COLUMNS} FROM {self._p}events"
            f" WHERE session_id = {m} AND cursor > {m} ORDER BY cursor LIMIT {m}",
            (session_id, after, limit),
        )
        return [event_from_row(session_id, row) for row in rows]

    async def _snapshot_body(self, session_id: str) -> str | None:
        return await self._first(
            f"SELECT body FROM {self._p}snapshots WHERE session_id = {self._mark}",
            (session_id,),
        )

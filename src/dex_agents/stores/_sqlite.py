"""The default runtime store: one SQLite file in WAL mode.

One file is shared by the worker process (which writes segments, events,
blobs and turns) and by client processes (which follow events and list snapshots), so every
guarantee is made by SQLite itself rather than by in-process state:

- WAL mode lets readers in other processes follow the event log while a writer
  appends, and `busy_timeout` makes a writer wait for another writer's lock
  instead of failing.
- Event cursors are allocated inside a `BEGIN IMMEDIATE` transaction (max + 1),
  so two writer processes can never hand out the same cursor.
- Blocking calls run on a small thread pool owned by the store, one connection
  per thread, so the event loop never waits on disk or on a lock.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self, TypeVar

from pydantic import TypeAdapter

from .._errors import UserError
from ..session import JsonObject, StoredMessage
from ..session._events import EventRecord
from ._rules import (
    EVENT_COLUMNS,
    MESSAGES,
    PollsEvents,
    at_least_one,
    blob_digest,
    chain_messages,
    check_same_blob,
    check_same_segment,
    event_from_row,
    event_values,
    missing_blob,
    snapshot_version,
    turn_number,
    unknown_cursor,
)

_T = TypeVar("_T")

_JSON_OBJECT = TypeAdapter(JsonObject)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS segments (
    session_id TEXT NOT NULL,
    segment_id TEXT NOT NULL,
    parent_id TEXT,
    body TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, segment_id)
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    cursor INTEGER NOT NULL,
    turn_id TEXT NOT NULL,
    step_execution_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, cursor)
);
CREATE TABLE IF NOT EXISTS snapshots (
    session_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS snapshots_by_update ON snapshots (updated_at);
CREATE TABLE IF NOT EXISTS blobs (
    session_id TEXT NOT NULL,
    blob_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, blob_id)
);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, number)
);
"""

# The walk carries its depth and stops at `:max_segments`, so the tail of a long
# chain costs that many rows. Rows with a depth are never duplicates, so UNION
# would not stop a corrupt chain that loops back on itself: the depth bound
# does, and without `:max_segments` it is the session's segment count, which
# no chain can exceed without looping. The order (and the loop's error) is
# rebuilt in Python from the parent links.
_CHAIN = """
WITH RECURSIVE chain(segment_id, parent_id, body, depth) AS (
    SELECT segment_id, parent_id, body, 1 FROM segments
    WHERE session_id = :session_id AND segment_id = :head_id
    UNION ALL
    SELECT s.segment_id, s.parent_id, s.body, chain.depth + 1 FROM segments AS s
    JOIN chain ON s.segment_id = chain.parent_id
    WHERE s.session_id = :session_id AND chain.depth < COALESCE(
        :max_segments,
        (SELECT count(*) FROM segments WHERE session_id = :session_id)
    )
)
SELECT segment_id, parent_id, body FROM chain
"""


class SQLiteRuntimeStore(PollsEvents):
    """`RuntimeStore` on one SQLite file, safe to share between processes.

    The constructor touches nothing on disk; the file and its tables are created
    by `open` or by the first call. Close the store to release its threads.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0
    ) -> None:
        """Prepare a store on `path`.

        Args:
            path: The database file; missing parent directories are created.
            busy_timeout: Seconds a write waits for another process's lock.
        """
        self.path = Path(path)
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._executor = ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="dex-agents-sqlite"
        )
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._schema_ready = False
        self._closed = False

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, busy_timeout: float = 10.0
    ) -> Self:
        """Create the store and its tables now, so a bad path fails here."""
        store = cls(path, busy_timeout=busy_timeout)
        await store._run(lambda _: None)
        return store

    # -- plumbing ----------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: autocommit, so transactions are exactly the
        # explicit BEGIN IMMEDIATE blocks below. check_same_thread=False only so
        # `close` can close every thread's connection after the pool stops.
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        conn.execute("PRAGMA synchronous = NORMAL")
        with self._lock:
            try:
                if not self._schema_ready:
                    # journal_mode is stored in the file: setting it once is enough.
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.executescript(_SCHEMA)
                    self._schema_ready = True
            except BaseException:
                conn.close()
                raise
            self._connections.append(conn)
        self._local.conn = conn
        return conn

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise UserError(f"the runtime store on {str(self.path)!r} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, lambda: fn(self._connection())
        )

    async def _transact(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `fn` in a write transaction that takes the file's write lock first.

        `BEGIN IMMEDIATE` makes a read-then-write (cursor max + 1, version check)
        atomic across processes: a deferred transaction could read, lose the
        race to upgrade its lock, and fail instead of waiting.
        """

        def write(conn: sqlite3.Connection) -> _T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self._run(write)

    # -- segments ----------------------------------------------------------

    async def put_segment(
        self,
        session_id: str,
        segment_id: str,
        parent_id: str | None,
        messages: Sequence[StoredMessage],
    ) -> None:
        """Write one immutable segment; see `RuntimeStore.put_segment`."""
        body = MESSAGES.dump_json(list(messages)).decode()

        def put(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT parent_id, body FROM segments"
                " WHERE session_id = ? AND segment_id = ?",
                (session_id, segment_id),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO segments VALUES (?, ?, ?, ?, ?)",
                    (session_id, segment_id, parent_id, body, time.time()),
                )
            else:
                check_same_segment(session_id, segment_id, row, parent_id, body)

        await self._transact(put)

    async def read_segment(
        self, session_id: str, segment_id: str
    ) -> list[StoredMessage]:
        """The messages of one segment; `KeyError` if it was never written."""

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT body FROM segments WHERE session_id = ? AND segment_id = ?",
                (session_id, segment_id),
            ).fetchone()
            return None if row is None else row[0]

        body = await self._run(read)
        if body is None:
            raise KeyError(f"session {session_id!r} has no segment {segment_id!r}")
        return MESSAGES.validate_json(body)

    async def read_transcript(
        self, session_id: str, head_id: str | None, *, max_segments: int | None = None
    ) -> list[StoredMessage]:
        """The chain ending at `head_id`, oldest first; see `RuntimeStore.read_transcript`."""
        at_least_one("max_segments", max_segments)
        if head_id is None:
            return []

        def read(conn: sqlite3.Connection) -> list[tuple[str, str | None, str]]:
            params = {
                "session_id": session_id,
                "head_id": head_id,
                "max_segments": max_segments,
            }
            return conn.execute(_CHAIN, params).fetchall()

        rows = await self._run(read)
        return chain_messages(session_id, head_id, rows, max_segments)

    # -- blobs -------------------------------------------------------------

    async def put_blob(self, session_id: str, blob_id: str, data: bytes) -> None:
        """Write one immutable blob; see `RuntimeStore.put_blob`."""

        def put(conn: sqlite3.Connection) -> None:
            # Hashed on the pool thread: megabytes would stall the event loop.
            digest = blob_digest(data)
            # No BEGIN IMMEDIATE: a blob never changes once written, so the only
            # race is two first writes, which the primary key settles.
            # The digest first, so a retry does not write the bytes again.
            stored = self._blob_digest(conn, session_id, blob_id)
            if stored is None:
                inserted = conn.execute(
                    "INSERT INTO blobs VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (session_id, blob_id) DO NOTHING",
                    (session_id, blob_id, digest, data, time.time()),
                ).rowcount
                if inserted == 1:
                    return
                stored = self._blob_digest(conn, session_id, blob_id)
            assert stored is not None  # the insert conflicted with this very row
            check_same_blob(session_id, blob_id, stored, digest)

        await self._run(put)

    @staticmethod
    def _blob_digest(
        conn: sqlite3.Connection, session_id: str, blob_id: str
    ) -> str | None:
        # `sha256` precedes `data` in the row, so this never reads the blob's pages.
        row = conn.execute(
            "SELECT sha256 FROM blobs WHERE session_id = ? AND blob_id = ?",
            (session_id, blob_id),
        ).fetchone()
        return None if row is None else row[0]

    async def get_blob(self, session_id: str, blob_id: str) -> bytes:
        """The bytes of one blob; `KeyError` if it was never written."""

        def read(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(
                "SELECT data FROM blobs WHERE session_id = ? AND blob_id = ?",
                (session_id, blob_id),
            ).fetchone()
            return None if row is None else bytes(row[0])

        data = await self._run(read)
        if data is None:
            raise missing_blob(session_id, blob_id)
        return data

    # -- turns -------------------------------------------------------------

    async def put_turn(self, session_id: str, number: int, turn: JsonObject) -> None:
        """Record (or replace) finished turn `number`; see `RuntimeStore.put_turn`."""
        row = (session_id, turn_number(number), _JSON_OBJECT.dump_json(turn).decode())

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO turns VALUES (?, ?, ?)"
                " ON CONFLICT (session_id, number) DO UPDATE SET body = excluded.body",
                row,
            )

        await self._run(put)

    async def read_turns(
        self, session_id: str, *, before: int | None = None, limit: int = 20
    ) -> list[JsonObject]:
        """Turns numbered below `before`, newest first, at most `limit`."""
        at_least_one("limit", limit)
        # Two statements rather than `(? IS NULL OR number < ?)`, which the
        # planner cannot turn into a range of the primary key.
        if before is None:
            sql = "SELECT body FROM turns WHERE session_id = ?"
            params: tuple[Any, ...] = (session_id, limit)
        else:
            sql = "SELECT body FROM turns WHERE session_id = ? AND number < ?"
            params = (session_id, before, limit)

        def read(conn: sqlite3.Connection) -> list[tuple[str]]:
            return conn.execute(
                f"{sql} ORDER BY number DESC LIMIT ?", params
            ).fetchall()

        return [_JSON_OBJECT.validate_json(body) for (body,) in await self._run(read)]

    async def count_turns(self, session_id: str) -> int:
        """How many turns the session has recorded."""

        def count(conn: sqlite3.Connection) -> int:
            (n,) = conn.execute(
                "SELECT count(*) FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()
            return n

        return await self._run(count)

    # -- events ------------------------------------------------------------

    async def append_events(self, events: Sequence[EventRecord]) -> list[int]:
        """Append events and return their cursors; see `RuntimeStore.append_events`."""
        if not events:
            return []
        rows = [(e.session_id, *event_values(e)) for e in events]

        def append(conn: sqlite3.Connection) -> list[int]:
            last: dict[str, int] = {}
            cursors: list[int] = []
            for session_id, *rest in rows:
                if session_id not in last:
                    (top,) = conn.execute(
                        "SELECT COALESCE(MAX(cursor), 0) FROM events"
                        " WHERE session_id = ?",
                        (session_id,),
                    ).fetchone()
                    last[session_id] = top
                cursor = last[session_id] = last[session_id] + 1
                conn.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (session_id, cursor, *rest),
                )
                cursors.append(cursor)
            return cursors

        return await self._transact(append)

    async def read_events(
        self, session_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[EventRecord]:
        """Events of `session_id` with a cursor above `after`, in cursor order."""

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"SELECT {EVENT_COLUMNS}"
                " FROM events WHERE session_id = ? AND cursor > ?"
                " ORDER BY cursor LIMIT ?",
                (session_id, after, limit),
            ).fetchall()

        rows = await self._run(read)
        return [event_from_row(session_id, row) for row in rows]

    # -- snapshots ---------------------------------------------------------

    async def put_snapshot(self, session_id: str, snapshot: JsonObject) -> None:
        """Replace the session's projection unless it holds a higher `version`."""
        version = snapshot_version(snapshot)
        body = _JSON_OBJECT.dump_json(snapshot).decode()

        def put(conn: sqlite3.Connection) -> None:
            # Strictly increasing even within one clock tick, so
            # `list_snapshots` has a well-defined newest-first order.
            (top,) = conn.execute(
                "SELECT COALESCE(MAX(updated_at), 0) FROM snapshots"
            ).fetchone()
            updated_at = max(time.time(), top + 1e-6)
            conn.execute(
                "INSERT INTO snapshots VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET"
                " version = excluded.version, updated_at = excluded.updated_at,"
                " body = excluded.body"
                " WHERE excluded.version >= snapshots.version",
                (session_id, version, updated_at, body),
            )

        await self._transact(put)

    async def get_snapshot(self, session_id: str) -> JsonObject | None:
        """The last projection of the session, or None."""

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT body FROM snapshots WHERE session_id = ?", (session_id,)
            ).fetchone()
            return None if row is None else row[0]

        body = await self._run(read)
        return None if body is None else _JSON_OBJECT.validate_json(body)

    async def list_snapshots(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[JsonObject]:
        """A page of projections, newest first; see `RuntimeStore.list_snapshots`."""
        at_least_one("limit", limit)

        def read(conn: sqlite3.Connection) -> list[tuple[str]] | None:
            bound = float("inf")
            if before is not None:
                row = conn.execute(
                    "SELECT updated_at FROM snapshots WHERE session_id = ?", (before,)
                ).fetchone()
                if row is None:
                    return None
                bound = row[0]
            return conn.execute(
                "SELECT body FROM snapshots WHERE updated_at < ?"
                " AND (? IS NULL OR json_extract(body, '$.status') = ?)"
                " ORDER BY updated_at DESC LIMIT ?",
                (bound, status, status, -1 if limit is None else limit),
            ).fetchall()

        rows = await self._run(read)
        if rows is None:
            raise unknown_cursor(before)
        return [_JSON_OBJECT.validate_json(body) for (body,) in rows]

    async def close(self) -> None:
        """Stop the thread pool and close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()

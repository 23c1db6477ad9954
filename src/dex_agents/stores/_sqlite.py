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
from typing import Any, Self, TypeVar, cast

from .._errors import StoreUnavailableError, UserError, is_positive_number, must_be
from ..session._events import EventRecord
from ..session._json import JsonObject
from ._base import SQLStoreBase
from ._rules import (
    EVENT_FIELD_DEFINITIONS,
    JSON_OBJECT,
    blob_digest,
    check_same_blob,
    event_values,
)

_T = TypeVar("_T")

_SCHEMA = f"""
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
    {EVENT_FIELD_DEFINITIONS},
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


_UNAVAILABLE = ("database is locked", "database table is locked", "disk i/o error")
"""How SQLite says that a file is there but cannot serve a call now."""


def _unavailable(err: sqlite3.OperationalError) -> bool:
    """Whether `err` is the file being locked or unreadable now, not a bug."""
    return str(err).lower().startswith(_UNAVAILABLE)


def _check_path(path: object) -> None:
    """Refuse a `path` that is a URL or not a path: it would become a local file."""
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise must_be(
            "path",
            "a file path (str or pathlib.Path)",
            path,
            'use SQLiteRuntimeStore("runtime.sqlite")',
        )
    # Here, not at the top: `_open` builds on this module.
    from ._open import is_database_url, redacted_store

    text = os.fspath(cast("str | os.PathLike[str]", path))
    database = is_database_url(text)
    if database or "://" in text:
        fix = (
            "a PostgreSQL store is `PostgresRuntimeStore(dsn)` (dex_agents.postgres), "
            "and `open_runtime_store(location)` (dex_agents.stores) opens the store "
            "any location names"
        )
        raise must_be(
            "path",
            "a SQLite file path, not a URL",
            redacted_store(text),
            fix if database else f"pass a file path; {fix}",
        )


def _check_busy_timeout(value: object) -> None:
    """Refuse a `busy_timeout` that is not a positive, finite number of seconds."""
    if not is_positive_number(value):
        raise must_be(
            "busy_timeout",
            "a positive, finite number of seconds",
            value,
            "use busy_timeout=10.0",
        )


def _first_value(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> Any:
    """The first column of the first row `sql` answers, or None."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


class SQLiteRuntimeStore(SQLStoreBase):
    """`RuntimeStore` on one SQLite file, safe to share between processes.

    The constructor touches nothing on disk; the file and its tables are created
    by `open` or by the first call. Close the store to release its threads.
    """

    _mark = "?"
    _p = ""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0
    ) -> None:
        """Prepare a store on `path`.

        Args:
            path: The database file; missing parent directories are created.
            busy_timeout: Seconds a write waits for another process's lock.

        Raises:
            InvalidArgumentError: `path` is a URL (a PostgreSQL one belongs to
                `PostgresRuntimeStore`, or `open_runtime_store`) or not a path,
                or `busy_timeout` is not a positive finite number.
        """
        _check_path(path)
        _check_busy_timeout(busy_timeout)
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
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA synchronous = NORMAL")
            with self._lock:
                if not self._schema_ready:
                    # journal_mode is stored in the file: setting it once is enough.
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.executescript(_SCHEMA)
                    self._schema_ready = True
                self._connections.append(conn)
        except BaseException as err:
            conn.close()
            if isinstance(err, sqlite3.DatabaseError) and "not a database" in str(err):
                raise UserError(
                    f"{str(self.path)!r} is not a dex-agents SQLite store (the file is "
                    "not an SQLite database); pass the runtime store's own file, or a "
                    "new path to create one"
                ) from err
            raise
        self._local.conn = conn
        return conn

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise UserError(f"the runtime store on {str(self.path)!r} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor, lambda: fn(self._connection())
            )
        except sqlite3.OperationalError as err:
            if not _unavailable(err):
                raise  # a bug (no such table, a syntax error) stays one
            raise StoreUnavailableError(repr(str(self.path)), str(err)) from err

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

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return await self._run(lambda conn: conn.execute(sql, params).fetchall())

    async def _write(self, sql: str, params: Sequence[Any]) -> None:
        await self._run(lambda conn: conn.execute(sql, params))

    # -- segments ----------------------------------------------------------

    async def _add_segment(
        self, session_id: str, segment_id: str, parent_id: str | None, body: str
    ) -> tuple[str | None, str] | None:
        def add(conn: sqlite3.Connection) -> tuple[str | None, str] | None:
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
            return row

        return await self._transact(add)

    async def _chain_rows(
        self, session_id: str, head_id: str, max_segments: int | None
    ) -> list[tuple[str, str | None, str]]:
        params = {
            "session_id": session_id,
            "head_id": head_id,
            "max_segments": max_segments,
        }
        return await self._run(lambda conn: conn.execute(_CHAIN, params).fetchall())

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
        return _first_value(
            conn,
            "SELECT sha256 FROM blobs WHERE session_id = ? AND blob_id = ?",
            (session_id, blob_id),
        )

    async def _blob_data(self, session_id: str, blob_id: str) -> bytes | None:
        data = await self._first(
            "SELECT data FROM blobs WHERE session_id = ? AND blob_id = ?",
            (session_id, blob_id),
        )
        return None if data is None else bytes(data)

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

    # -- snapshots ---------------------------------------------------------

    async def _set_snapshot(self, session_id: str, version: int, body: str) -> None:
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

    async def _snapshot_page(
        self, status: str | None, limit: int | None, before: str | None
    ) -> list[JsonObject] | None:
        def read(conn: sqlite3.Connection) -> list[tuple[str]] | None:
            bound = float("inf")
            if before is not None:
                bound = _first_value(
                    conn,
                    "SELECT updated_at FROM snapshots WHERE session_id = ?",
                    (before,),
                )
                if bound is None:
                    return None
            return conn.execute(
                "SELECT body FROM snapshots WHERE updated_at < ?"
                " AND (? IS NULL OR json_extract(body, '$.status') = ?)"
                " ORDER BY updated_at DESC LIMIT ?",
                (bound, status, status, -1 if limit is None else limit),
            ).fetchall()

        rows = await self._run(read)
        if rows is None:
            return None
        return [JSON_OBJECT.validate_json(body) for (body,) in rows]

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

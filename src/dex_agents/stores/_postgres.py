"""`PostgresRuntimeStore`: the runtime store that every machine of a deployment shares.

The SQLite store is one file on one machine. Past one machine, workers and
clients on different hosts must see the same transcript segments, event log,
snapshot projections, blobs and turn log, so they share one PostgreSQL
database (extra `[postgres]`). Every guarantee of the `RuntimeStore` contract is made by the
database, never by process state:

- event cursors come from a per-session counter row, incremented with
  `INSERT ... ON CONFLICT DO UPDATE ... RETURNING` in the transaction that
  inserts the events, so writers on different hosts never share a cursor and a
  rolled-back append leaves no gap that a reader could skip past;
- a snapshot replaces the stored one only when its `version` is not lower, in
  one statement, and its listing order comes from a sequence, so it is strict
  across hosts whatever their clocks say;
- the tables are created on first use under a transaction-scoped advisory
  lock, so two workers starting at once do not race on `CREATE TABLE`.

Followers poll (`poll_interval`) like the SQLite store, which keeps the store
usable behind connection poolers that do not pass `LISTEN`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, LiteralString, Self, cast

from .._errors import StoreUnavailableError, UserError
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

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'the PostgreSQL runtime store needs psycopg: pip install "dex-agents[postgres]"'
    ) from e

_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,30}")
_SCHEMA_LOCK = 0x64657861  # "dexa": serializes CREATE TABLE between hosts


def _sql(text: str) -> LiteralString:
    """A query built from constants and the validated table prefix only."""
    return cast(LiteralString, text)


_OBJECTS = (
    "segments",
    "event_cursors",
    "events",
    "snapshot_order",
    "snapshots",
    "blobs",
    "turns",
)
"""The store's tables and sequence (without the prefix), checked before any DDL.

A database created before a table was added lacks it, so the next open creates
it (every statement is `IF NOT EXISTS`).
"""

# Keywords of `psycopg.AsyncConnection.connect`: `autocommit`, then libpq parameters.
_CONNECTION: dict[str, Any] = {
    # Single statements commit at once: a poll is one round trip, not BEGIN/COMMIT.
    "autocommit": True,
    "connect_timeout": 10,
    # A half-open connection (a partition) is noticed in about a minute, not hours.
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    # A stuck lock holder fails the waiter instead of hanging it until the
    # activity's timeout; an abandoned transaction cannot hold locks forever.
    "options": "-c lock_timeout=10000 -c idle_in_transaction_session_timeout=60000",
}


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    """Pin READ COMMITTED: the cursor counter relies on it, whatever the database default.

    Under REPEATABLE READ or SERIALIZABLE, two appends to one session abort
    with a serialization failure instead of waiting for the counter row.
    """
    await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)


async def _one(
    conn: psycopg.AsyncConnection[Any],
    sql: str,
    params: Sequence[Any],
    *,
    binary: bool = False,
) -> tuple[Any, ...] | None:
    """The first row `sql` answers on `conn`, or None."""
    cur = await conn.execute(_sql(sql), params, binary=binary)
    return await cur.fetchone()


async def _insert_new(
    conn: psycopg.AsyncConnection[Any], sql: str, params: Sequence[Any]
) -> bool:
    """Run the INSERT `sql` unless its key is taken; whether it inserted the row."""
    cur = await conn.execute(_sql(f"{sql} ON CONFLICT DO NOTHING"), params)
    return cur.rowcount == 1


def _schema(p: str) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}segments (
            session_id TEXT NOT NULL,
            segment_id TEXT NOT NULL,
            parent_id TEXT,
            body TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (session_id, segment_id))""",
        f"""CREATE TABLE IF NOT EXISTS {p}event_cursors (
            session_id TEXT PRIMARY KEY,
            last_cursor BIGINT NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {p}events (
            session_id TEXT NOT NULL,
            cursor BIGINT NOT NULL,
            {EVENT_FIELD_DEFINITIONS},
            PRIMARY KEY (session_id, cursor))""",
        f"CREATE SEQUENCE IF NOT EXISTS {p}snapshot_order",
        f"""CREATE TABLE IF NOT EXISTS {p}snapshots (
            session_id TEXT PRIMARY KEY,
            version BIGINT NOT NULL,
            updated_order BIGINT NOT NULL,
            body TEXT NOT NULL)""",
        f"""CREATE INDEX IF NOT EXISTS {p}snapshots_by_update
            ON {p}snapshots (updated_order)""",
        f"""CREATE TABLE IF NOT EXISTS {p}blobs (
            session_id TEXT NOT NULL,
            blob_id TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            data BYTEA NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (session_id, blob_id))""",
        f"""CREATE TABLE IF NOT EXISTS {p}turns (
            session_id TEXT NOT NULL,
            number BIGINT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, number))""",
    ]


def _chain(p: str) -> str:
    """The rows of the chain ending at `%(h)s`, at most `%(n)s` of them (NULL: all).

    The walk stops at depth `%(n)s`, so a tail costs its own rows. Rows with a
    depth are never duplicates, so UNION could not stop a corrupt, looping
    chain: the depth bound does, and without `%(n)s` it is the session's
    segment count, which no chain exceeds without looping. The order is
    rebuilt from the parent links, which also name a missing segment and the
    loop.
    """
    return f"""WITH RECURSIVE chain(segment_id, parent_id, body, depth) AS (
        SELECT segment_id, parent_id, body, 1 FROM {p}segments
        WHERE session_id = %(s)s AND segment_id = %(h)s
        UNION ALL
        SELECT s.segment_id, s.parent_id, s.body, chain.depth + 1
        FROM {p}segments AS s
        JOIN chain ON s.segment_id = chain.parent_id
        WHERE s.session_id = %(s)s AND chain.depth < COALESCE(
            %(n)s::bigint,
            (SELECT count(*) FROM {p}segments WHERE session_id = %(s)s)))
    SELECT segment_id, parent_id, body FROM chain"""


class PostgresRuntimeStore(SQLStoreBase):
    """`RuntimeStore` on a PostgreSQL database shared by every worker and client.

    The constructor connects to nothing; the pool opens and the tables are
    created by `open` or by the first call. Close the store to release its
    connections.
    """

    _mark = "%s"

    def __init__(
        self,
        dsn: str,
        *,
        table_prefix: str = "dex_agents_",
        max_connections: int = 10,
    ) -> None:
        """Prepare a store on the database `dsn`.

        Args:
            dsn: A libpq connection string or `postgresql://` URL.
            table_prefix: Prefix of the store's tables, so they can live beside
                an application's own tables in one database.
            max_connections: The pool's size; each concurrent call holds one.

        Raises:
            UserError: The prefix is not a plain lowercase SQL identifier.
        """
        if not _PREFIX.fullmatch(table_prefix):
            raise UserError(
                f"table_prefix {table_prefix!r} must be lowercase letters, digits "
                "and underscores, starting with a letter or underscore (at most 31)"
            )
        self.dsn = dsn
        self._p = table_prefix
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = (
            AsyncConnectionPool(
                dsn,
                connection_class=psycopg.AsyncConnection[Any],
                kwargs=dict(_CONNECTION),
                configure=_configure,
                # A connection the server dropped (restart, failover, idle
                # timeout) is replaced before use instead of failing a call.
                check=AsyncConnectionPool.check_connection,
                max_idle=300,
                min_size=1,
                max_size=max_connections,
                open=False,
            )
        )
        self._ready: asyncio.Lock | None = None
        self._opened = False
        self._closed = False

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        table_prefix: str = "dex_agents_",
        max_connections: int = 10,
    ) -> Self:
        """Create the store, connect, and create its tables now, so a bad DSN fails here."""
        store = cls(dsn, table_prefix=table_prefix, max_connections=max_connections)
        await store._ensure_open()
        return store

    @property
    def description(self) -> str:
        """The database, for messages: host, port and name, never the password."""
        try:
            info = conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError:
            return "PostgreSQL (unparsable DSN)"
        host, port, name = info.get("host"), info.get("port"), info.get("dbname")
        where = f"{host or 'localhost'}:{port or 5432}"
        return f"PostgreSQL {where}/{name or ''} (tables {self._p}*)"

    # -- plumbing ----------------------------------------------------------

    async def _ensure_open(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        if self._closed:
            raise UserError("the PostgreSQL runtime store is closed")
        if self._opened:
            return self._pool
        if self._ready is None:
            self._ready = asyncio.Lock()
        async with self._ready:
            if not self._opened:
                # One direct connection first: a bad DSN fails with the server's
                # own reason, where the pool would only time out.
                try:
                    conn = await psycopg.AsyncConnection.connect(
                        self.dsn, **_CONNECTION
                    )
                except psycopg.Error as e:
                    raise UserError(
                        f"cannot connect to the PostgreSQL runtime store: {e}".rstrip()
                        + "; check the DSN and that the server is reachable"
                    ) from e
                async with conn:
                    await _configure(conn)
                    await self._create_missing(conn)
                await self._pool.open()
                self._opened = True
        return self._pool

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncGenerator[psycopg.AsyncConnection[Any]]:
        """A pooled connection; a failure to reach the database is `StoreUnavailableError`.

        `psycopg.OperationalError` is the server gone or restarting, a dropped
        connection, a pool that timed out (`PoolTimeout`), a cancelled or
        locked statement: the store opened, and the same call can succeed
        later, so it is not reported as a bug. Programming errors (SQL, types)
        pass unchanged.
        """
        pool = await self._ensure_open()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise StoreUnavailableError(
                self.description, reason or type(err).__name__
            ) from err

    async def _missing(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        row = await _one(
            conn,
            "SELECT count(to_regclass(name)) FROM unnest(%s::text[]) AS name",
            ([f"{self._p}{name}" for name in _OBJECTS],),
        )
        return row is None or row[0] < len(_OBJECTS)

    async def _create_missing(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Create the tables unless they all exist, so a role without CREATE can use them.

        Raises:
            UserError: They are missing and this role may not create them.
        """
        if not await self._missing(conn):
            return
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _schema(self._p):
                    await conn.execute(_sql(statement))
        except psycopg.Error as e:
            raise UserError(
                f"cannot create the runtime store's tables ({self._p}*): {e}".rstrip()
                + "; open the store once with a role that may create them, or "
                "grant this role CREATE on the schema"
            ) from e

    async def _rows(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        async with self._connection() as conn:
            cur = await conn.execute(_sql(sql), params)
            return await cur.fetchall()

    async def _write(self, sql: str, params: Sequence[Any]) -> None:
        async with self._connection() as conn:
            await conn.execute(_sql(sql), params)

    # -- segments ----------------------------------------------------------

    async def _add_segment(
        self, session_id: str, segment_id: str, parent_id: str | None, body: str
    ) -> tuple[str | None, str] | None:
        async with self._connection() as conn:
            if await _insert_new(
                conn,
                f"INSERT INTO {self._p}segments"
                " (session_id, segment_id, parent_id, body) VALUES (%s, %s, %s, %s)",
                (session_id, segment_id, parent_id, body),
            ):
                return None
            row = await _one(
                conn,
                f"SELECT parent_id, body FROM {self._p}segments"
                " WHERE session_id = %s AND segment_id = %s",
                (session_id, segment_id),
            )
        assert row is not None  # the insert conflicted with this very row
        return row

    async def _chain_rows(
        self, session_id: str, head_id: str, max_segments: int | None
    ) -> list[tuple[Any, ...]]:
        return await self._rows(
            _chain(self._p), {"s": session_id, "h": head_id, "n": max_segments}
        )

    # -- blobs -------------------------------------------------------------

    async def put_blob(self, session_id: str, blob_id: str, data: bytes) -> None:
        """Write one immutable blob; see `RuntimeStore.put_blob`."""
        # Hashed on a thread: megabytes would stall the event loop.
        digest = await asyncio.to_thread(blob_digest, data)
        async with self._connection() as conn:
            # The digest first, so a retry does not send the bytes again.
            stored = await self._blob_digest(conn, session_id, blob_id)
            if stored is None:
                # %b: the bytes travel in binary, not escaped to twice their size.
                if await _insert_new(
                    conn,
                    f"INSERT INTO {self._p}blobs"
                    " (session_id, blob_id, sha256, data) VALUES (%s, %s, %s, %b)",
                    (session_id, blob_id, digest, data),
                ):
                    return
                stored = await self._blob_digest(conn, session_id, blob_id)
        assert stored is not None  # the insert conflicted with this very row
        check_same_blob(session_id, blob_id, stored, digest)

    async def _blob_digest(
        self, conn: psycopg.AsyncConnection[Any], session_id: str, blob_id: str
    ) -> str | None:
        row = await _one(
            conn,
            f"SELECT sha256 FROM {self._p}blobs WHERE session_id = %s AND blob_id = %s",
            (session_id, blob_id),
        )
        return None if row is None else row[0]

    async def _blob_data(self, session_id: str, blob_id: str) -> bytes | None:
        async with self._connection() as conn:
            # Binary results: as text, BYTEA would travel hex-encoded, twice its size.
            row = await _one(
                conn,
                f"SELECT data FROM {self._p}blobs WHERE session_id = %s AND blob_id = %s",
                (session_id, blob_id),
                binary=True,
            )
        return None if row is None else bytes(row[0])

    # -- events ------------------------------------------------------------

    async def append_events(self, events: Sequence[EventRecord]) -> list[int]:
        """Append events and return their cursors; see `RuntimeStore.append_events`."""
        if not events:
            return []
        counts: dict[str, int] = {}
        for e in events:
            counts[e.session_id] = counts.get(e.session_id, 0) + 1
        async with self._connection() as conn, conn.transaction():
            # Sessions in a fixed order, so two appends never wait on each other's rows.
            next_cursor: dict[str, int] = {}
            for session_id in sorted(counts):
                row = await _one(
                    conn,
                    f"INSERT INTO {self._p}event_cursors AS c VALUES (%s, %s)"
                    " ON CONFLICT (session_id) DO UPDATE"
                    " SET last_cursor = c.last_cursor + excluded.last_cursor"
                    " RETURNING last_cursor",
                    (session_id, counts[session_id]),
                )
                assert row is not None
                next_cursor[session_id] = int(row[0]) - counts[session_id] + 1
            cursors: list[int] = []
            rows: list[tuple[Any, ...]] = []
            for e in events:
                cursor = next_cursor[e.session_id]
                next_cursor[e.session_id] += 1
                cursors.append(cursor)
                rows.append((e.session_id, cursor, *event_values(e)))
            async with conn.cursor() as cur:
                await cur.executemany(
                    _sql(
                        f"INSERT INTO {self._p}events VALUES"
                        " (%s, %s, %s, %s, %s, %s, %s, %s)"
                    ),
                    rows,
                )
        return cursors

    # -- snapshots ---------------------------------------------------------

    async def _set_snapshot(self, session_id: str, version: int, body: str) -> None:
        await self._write(
            f"INSERT INTO {self._p}snapshots AS s"
            f" VALUES (%s, %s, nextval('{self._p}snapshot_order'), %s)"
            " ON CONFLICT (session_id) DO UPDATE SET"
            " version = excluded.version,"
            " updated_order = excluded.updated_order, body = excluded.body"
            " WHERE excluded.version >= s.version",
            (session_id, version, body),
        )

    async def _snapshot_page(
        self, status: str | None, limit: int | None, before: str | None
    ) -> list[JsonObject] | None:
        bound: int | None = None
        if before is not None:
            found = await self._rows(
                f"SELECT updated_order FROM {self._p}snapshots WHERE session_id = %s",
                (before,),
            )
            if not found:
                return None
            bound = int(found[0][0])
        rows = await self._rows(
            f"SELECT body FROM {self._p}snapshots"
            " WHERE (%(bound)s::bigint IS NULL OR updated_order < %(bound)s::bigint)"
            " AND (%(status)s::text IS NULL OR body::jsonb ->> 'status' = %(status)s::text)"
            " ORDER BY updated_order DESC LIMIT %(limit)s::bigint",
            {"bound": bound, "status": status, "limit": limit},
        )
        return [JSON_OBJECT.validate_json(body) for (body,) in rows]

    async def close(self) -> None:
        """Close the pool; idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()

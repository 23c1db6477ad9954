"""A store that opened but cannot serve a call now is `StoreUnavailableError`, not a bug.

A SQLite file another process keeps locked past `busy_timeout`, a PostgreSQL
statement that waits past its lock timeout, a server gone: the raw
`sqlite3.OperationalError` / `psycopg.OperationalError` escaped the store's
reads, and the CLI called them "unexpected ... please report it". The error
names the store (never a password) and says to try again; a bug (a programming
error) is not hidden behind it, and the same call works once the store does.
"""

from __future__ import annotations

import pickle
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from dex_agents import DexAgentsError, StoreUnavailableError, UserError
from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.testing._postgres_server import PostgresTestServer
from support.store_backends import text_event


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Another process's connection holding `path` exclusively, as a long writer does."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        yield
        holder.execute("COMMIT")
    finally:
        holder.close()


async def test_a_locked_sqlite_file_is_unavailable_then_serves_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runtime.sqlite"
    await (await SQLiteRuntimeStore.open(path)).close()
    store = SQLiteRuntimeStore(path, busy_timeout=0.2)
    try:
        with locked(path):
            for read in (
                lambda: store.read_events("s1"),
                lambda: store.get_snapshot("s1"),
                lambda: store.read_turns("s1", limit=5),
                lambda: store.append_events([text_event("s1", 1)]),
            ):
                with pytest.raises(StoreUnavailableError) as caught:
                    await read()
                err = caught.value
                assert not isinstance(err, UserError)
                assert isinstance(err, DexAgentsError)
                assert err.store == repr(str(path))
                assert err.reason == "database is locked"
                assert str(err).startswith(
                    f"the runtime store {str(path)!r} is unavailable: database is "
                    "locked; check that it is running and reachable"
                )
                assert pickle.loads(pickle.dumps(err)).reason == err.reason
        assert await store.append_events([text_event("s1", 1)]) == [1]
        assert [e.cursor for e in await store.read_events("s1")] == [1]
        # A programming error stays one.
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await store._rows("SELECT * FROM no_such_table", ())  # pyright: ignore[reportPrivateUsage]
    finally:
        await store.close()


async def test_a_postgres_statement_past_its_lock_timeout_is_unavailable(
    postgres_server: PostgresTestServer,
) -> None:
    name = f"db_{uuid.uuid4().hex[:10]}"
    dsn = postgres_server.create_database(name)
    store = await PostgresRuntimeStore.open(dsn)
    try:
        await store.append_events([text_event("s1", 1)])
        with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET lock_timeout = '200ms'").format(
                    sql.Identifier(name)
                )
            )
        await store.close()
        store = await PostgresRuntimeStore.open(dsn)  # its sessions take the setting
        with psycopg.connect(dsn) as holder:
            holder.execute("LOCK TABLE dex_agents_events IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreUnavailableError) as caught:
                await store.read_events("s1")
            holder.rollback()
        err = caught.value
        assert err.store == store.description
        assert "lock timeout" in err.reason
        assert f"the runtime store {store.description} is unavailable" in str(err)
        assert "password" not in str(err)
        assert [e.cursor for e in await store.read_events("s1")] == [1]
        # A programming error stays one.
        with pytest.raises(psycopg.errors.UndefinedTable):
            await store._rows("SELECT * FROM no_such_table", ())  # pyright: ignore[reportPrivateUsage]
    finally:
        await store.close()

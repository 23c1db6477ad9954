"""`PostgresRuntimeStore` on a real PostgreSQL server: what only it does.

The contract it shares with the SQLite store (conformance, writer processes, reopening,
closing, bounded reads) runs on both in `test_runtime_stores.py` and
`test_bounded_reads.py`.
"""

from __future__ import annotations

import pytest

from dex_agents import UserError
from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.stores._open import is_database_url, open_runtime_store
from dex_agents.testing._postgres_server import PostgresTestServer
from support.store_backends import table_prefix


async def test_two_machines_share_snapshots_and_segments(
    postgres_server: PostgresTestServer,
) -> None:
    prefix = table_prefix()
    worker = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    client = PostgresRuntimeStore(postgres_server.dsn, table_prefix=prefix)  # lazy
    try:
        await worker.put_snapshot("a", {"version": 2, "who": "a"})
        await worker.put_snapshot("b", {"version": 1, "who": "b"})
        await client.put_snapshot("a", {"version": 1, "who": "stale"})
        assert await client.get_snapshot("a") == {"version": 2, "who": "a"}
        assert [s["who"] for s in await client.list_snapshots()] == ["b", "a"]
        await client.put_snapshot("a", {"version": 3, "who": "a3"})
        assert [s["who"] for s in await worker.list_snapshots()] == ["a3", "b"]
    finally:
        await worker.close()
        await client.close()


async def test_an_unreachable_database_is_a_clear_error(
    postgres_server: PostgresTestServer,
) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{postgres_server.port}/no_such_db"
    with pytest.raises(UserError, match="no_such_db.*check the DSN"):
        await PostgresRuntimeStore.open(dsn)


def test_a_bad_table_prefix_is_refused_up_front() -> None:
    with pytest.raises(UserError, match="table_prefix 'x; DROP'"):
        PostgresRuntimeStore("postgresql://h/db", table_prefix="x; DROP")


async def test_a_url_opens_the_postgres_store_and_a_path_the_sqlite_one(
    postgres_server: PostgresTestServer, tmp_path: object
) -> None:
    assert is_database_url(postgres_server.dsn)
    assert not is_database_url("runtime.sqlite")
    store = await open_runtime_store(postgres_server.dsn)
    try:
        assert isinstance(store, PostgresRuntimeStore)
        assert "password" not in store.description
        assert f"127.0.0.1:{postgres_server.port}/postgres" in store.description
    finally:
        await store.close()

"""The PostgreSQL store in ordinary production setups: restarts, strict defaults, least privilege."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from psycopg import sql

from dex_agents import UserError
from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.testing._postgres_server import PostgresTestServer
from support.store_backends import text_event


def _database(server: PostgresTestServer) -> tuple[str, str]:
    name = f"db_{uuid.uuid4().hex[:10]}"
    return name, server.create_database(name)


async def test_calls_after_a_server_restart_reconnect_instead_of_failing(
    postgres_server: PostgresTestServer,
) -> None:
    del postgres_server  # a restart would drop other tests' connections: own server
    with PostgresTestServer() as server:
        store = await PostgresRuntimeStore.open(server.dsn, max_connections=4)
        try:
            # Fill the pool with idle connections, which the restart then kills.
            await asyncio.gather(*(store.get_snapshot(f"s{i}") for i in range(8)))
            await store.put_snapshot("s1", {"version": 1})
            server.restart()
            for _ in range(12):
                assert await store.get_snapshot("s1") == {"version": 1}
            assert await store.append_events([text_event("s1", 1)]) == [1]
        finally:
            await store.close()


async def test_concurrent_appends_work_under_a_stricter_default_isolation(
    postgres_server: PostgresTestServer,
) -> None:
    name, dsn = _database(postgres_server)
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "ALTER DATABASE {} SET default_transaction_isolation = 'serializable'"
            ).format(sql.Identifier(name))
        )
    store = await PostgresRuntimeStore.open(dsn)
    try:
        batches = await asyncio.gather(
            *(store.append_events([text_event("s1", i)]) for i in range(30))
        )
    finally:
        await store.close()
    assert sorted(c for batch in batches for c in batch) == list(range(1, 31))


async def test_a_role_without_create_uses_tables_that_exist_and_is_told_when_they_do_not(
    postgres_server: PostgresTestServer,
) -> None:
    name, owner_dsn = _database(postgres_server)
    role = f"app_{uuid.uuid4().hex[:8]}"
    await (await PostgresRuntimeStore.open(owner_dsn)).close()  # the owner creates them
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC, {}").format(
                sql.Identifier(role)
            )
        )
        conn.execute(
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {}"
            ).format(sql.Identifier(role))
        )
        conn.execute(
            sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}").format(
                sql.Identifier(role)
            )
        )
    app_dsn = f"postgresql://{role}@127.0.0.1:{postgres_server.port}/{name}"
    store = await PostgresRuntimeStore.open(app_dsn)
    try:
        await store.put_snapshot("s1", {"version": 1})
        assert await store.append_events([text_event("s1", 1)]) == [1]
        assert await store.get_snapshot("s1") == {"version": 1}
    finally:
        await store.close()
    with pytest.raises(UserError, match="cannot create the runtime store's tables"):
        await PostgresRuntimeStore.open(app_dsn, table_prefix="other_")

"""`PostgresRuntimeStore` on a real PostgreSQL server: the contract, across processes."""

from __future__ import annotations

import asyncio
import sys
import uuid

import pytest

from dex_agents import UserError
from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.session._events import EventRecord
from dex_agents.stores import RuntimeStore
from dex_agents.stores._open import is_database_url, open_runtime_store
from dex_agents.testing import run_runtime_store_conformance
from dex_agents.testing._postgres_server import PostgresTestServer

_WRITER = """
import asyncio, sys
from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.session._events import EventRecord

async def main(dsn: str, prefix: str, writer: str, count: int) -> None:
    store = await PostgresRuntimeStore.open(dsn, table_prefix=prefix)
    try:
        for seq in range(count):
            event = EventRecord(
                session_id="shared", turn_id=writer, step_execution_id="step",
                attempt=1, seq=seq, type="text_delta", data={"text": f"{writer} {seq}"},
            )
            await store.append_events([event])
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


def _prefix() -> str:
    """A fresh set of tables per store: each test starts empty in one database."""
    return f"t{uuid.uuid4().hex[:12]}_"


def _event(session_id: str, seq: int) -> EventRecord:
    return EventRecord(
        session_id=session_id,
        turn_id="turn-1",
        step_execution_id="step",
        attempt=1,
        seq=seq,
        type="text_delta",
        data={"text": str(seq)},
    )


async def test_postgres_store_conforms(postgres_server: PostgresTestServer) -> None:
    async def make() -> RuntimeStore:
        return await PostgresRuntimeStore.open(
            postgres_server.dsn, table_prefix=_prefix()
        )

    await run_runtime_store_conformance(make)


async def test_writer_processes_get_dense_cursors_while_another_follows(
    postgres_server: PostgresTestServer,
) -> None:
    prefix = _prefix()
    follower = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    count = 60
    received: list[EventRecord] = []

    async def follow() -> None:
        async for event in follower.follow_events("shared", poll_interval=0.005):
            received.append(event)
            if len(received) == 2 * count:
                return

    task = asyncio.create_task(follow())
    writers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, postgres_server.dsn, prefix, name, str(count)
        )
        for name in ("w1", "w2")
    ]
    try:
        async with asyncio.timeout(60):
            codes = [await proc.wait() for proc in writers]
            await task
    finally:
        task.cancel()
        for proc in writers:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await follower.close()
    assert codes == [0, 0]
    assert [e.cursor for e in received] == list(range(1, 2 * count + 1))
    for name in ("w1", "w2"):
        seqs = [e.seq for e in received if e.turn_id == name]
        assert seqs == list(range(count)), f"{name}'s events arrive in append order"


async def test_concurrent_appends_of_one_process_get_consecutive_cursors(
    postgres_server: PostgresTestServer,
) -> None:
    store = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=_prefix())
    try:
        batches = await asyncio.gather(
            *(
                store.append_events([_event("s1", i), _event("s1", i)])
                for i in range(40)
            )
        )
    finally:
        await store.close()
    assert sorted(c for batch in batches for c in batch) == list(range(1, 81))
    assert all(b == a + 1 for a, b in batches), "one call's cursors are consecutive"


async def test_two_machines_share_snapshots_and_segments(
    postgres_server: PostgresTestServer,
) -> None:
    prefix = _prefix()
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


async def test_data_survives_a_new_store_on_the_same_tables(
    postgres_server: PostgresTestServer,
) -> None:
    prefix = _prefix()
    first = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    await first.append_events([_event("s1", 0)])
    await first.close()
    second = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    try:
        assert await second.append_events([_event("s1", 1)]) == [2]
    finally:
        await second.close()


async def test_a_looping_chain_fails_and_a_closed_store_refuses_calls(
    postgres_server: PostgresTestServer,
) -> None:
    store = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=_prefix())
    await store.put_segment("s1", "a", "b", [])
    await store.put_segment("s1", "b", "a", [])
    with pytest.raises(ValueError, match="loops"):
        async with asyncio.timeout(5):
            await store.read_transcript("s1", "a")
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(UserError, match="closed"):
        await store.get_snapshot("s1")


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

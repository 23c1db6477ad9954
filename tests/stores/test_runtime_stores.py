import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from dex_agents import UserError
from dex_agents.session import StoredMessage
from dex_agents.session._events import EventRecord
from dex_agents.session._json import JsonObject
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.stores._memory import InMemoryRuntimeStore
from dex_agents.stores._protocols import SegmentConflictError
from dex_agents.testing import run_runtime_store_conformance
from support.store_backends import Backend, assert_conformance_catches, text_event

_WRITER = """
import asyncio, sys
from dex_agents.session._events import EventRecord

async def open_store(kind: str, location: str, prefix: str):
    if kind == "postgres":
        from dex_agents.postgres import PostgresRuntimeStore
        return await PostgresRuntimeStore.open(location, table_prefix=prefix)
    from dex_agents.stores import SQLiteRuntimeStore
    return await SQLiteRuntimeStore.open(location)

async def main(kind: str, location: str, prefix: str, writer: str, count: int) -> None:
    store = await open_store(kind, location, prefix)
    try:
        for seq in range(count):
            event = EventRecord(
                session_id="shared", turn_id=writer, step_execution_id="step",
                attempt=1, seq=seq, type="text_delta", data={"text": f"{writer} {seq}"},
            )
            await store.append_events([event])
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:5], int(sys.argv[5])))
"""


async def test_store_conforms(any_backend: Backend) -> None:
    await run_runtime_store_conformance(any_backend.open_fresh)


async def test_sqlite_store_uses_wal_and_creates_parent_directories(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "nested" / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(path)
    await store.close()
    with sqlite3.connect(path) as conn:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    assert mode == "wal"


async def test_data_survives_a_new_store_on_the_same_location(backend: Backend) -> None:
    store = backend.lazy()  # lazy: the first call creates the file or the tables
    await store.put_snapshot("s1", {"version": 1})
    await store.append_events([text_event("s1", 0)])
    await store.close()

    reopened = await backend.open()
    try:
        assert await reopened.get_snapshot("s1") == {"version": 1}
        assert await reopened.append_events([text_event("s1", 1)]) == [2]
    finally:
        await reopened.close()


async def test_writer_processes_get_dense_cursors_while_another_follows(
    backend: Backend,
) -> None:
    follower = await backend.open()
    count = 60
    received: list[EventRecord] = []

    async def follow() -> None:
        async for event in follower.follow_events("shared", poll_interval=0.005):
            received.append(event)
            if len(received) == 2 * count:
                return

    task = asyncio.create_task(follow())
    # Two writer processes contend for the cursor allocation while we follow.
    args = (backend.kind, backend.location, backend.prefix)
    writers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, *args, name, str(count)
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
    cursors = [e.cursor for e in received]
    assert cursors == list(range(1, 2 * count + 1)), "cursors are dense and in order"
    for name in ("w1", "w2"):
        seqs = [e.seq for e in received if e.turn_id == name]
        assert seqs == list(range(count)), f"{name}'s events arrive in append order"


async def test_concurrent_appends_of_one_process_get_consecutive_cursors(
    backend: Backend,
) -> None:
    store = await backend.open()
    try:
        batches = await asyncio.gather(
            *(
                store.append_events([text_event("s1", i), text_event("s1", i)])
                for i in range(40)
            )
        )
    finally:
        await store.close()
    cursors = sorted(c for batch in batches for c in batch)
    assert cursors == list(range(1, 81))
    assert all(b == a + 1 for a, b in batches), "one call's cursors are consecutive"


class _OverwritingStore(InMemoryRuntimeStore):
    async def put_segment(
        self,
        session_id: str,
        segment_id: str,
        parent_id: str | None,
        messages: Sequence[StoredMessage],
    ) -> None:
        with contextlib.suppress(SegmentConflictError):
            await super().put_segment(session_id, segment_id, parent_id, messages)


class _VersionBlindStore(InMemoryRuntimeStore):
    async def put_snapshot(self, session_id: str, snapshot: JsonObject) -> None:
        await super().put_snapshot(session_id, {**snapshot, "version": 10**9})


class _DeafFollowerStore(InMemoryRuntimeStore):
    async def follow_events(
        self, session_id: str, *, after: int = 0, poll_interval: float = 0.01
    ) -> AsyncIterator[EventRecord]:
        for event in await self.read_events(session_id, after=after):
            yield event
        await asyncio.Event().wait()  # never sees later appends


@pytest.mark.parametrize(
    ("store_type", "rule"),
    [
        (_OverwritingStore, "raises `SegmentConflictError`"),
        (_VersionBlindStore, "lower version is ignored"),
        (_DeafFollowerStore, "appended after it started"),
    ],
)
async def test_conformance_catches_broken_stores(
    store_type: type[InMemoryRuntimeStore], rule: str
) -> None:
    await assert_conformance_catches(store_type, rule)


async def test_closed_store_refuses_calls(any_backend: Backend) -> None:
    # One store never used before it is closed, one opened and used.
    used = await any_backend.open()
    await used.put_segment("s1", "root", None, [])
    for store in (any_backend.lazy(), used):
        await store.close()
        await store.close()  # idempotent
        with pytest.raises(UserError, match="closed"):
            await store.read_events("s1")
        with pytest.raises(UserError, match="closed"):
            await store.get_snapshot("s1")


async def test_snapshot_version_must_be_an_int() -> None:
    store = InMemoryRuntimeStore()
    with pytest.raises(Exception, match="version"):
        await store.put_snapshot("s1", {"version": "2"})


async def test_a_file_that_is_not_sqlite_is_refused_by_name_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("these are notes, not a database\n" * 10)
    expected = (
        f"{str(notes)!r} is not a dex-agents SQLite store (the file is not an SQLite "
        "database); pass the runtime store's own file, or a new path to create one"
    )
    with pytest.raises(UserError) as opened:
        await SQLiteRuntimeStore.open(notes)
    assert str(opened.value) == expected
    assert isinstance(opened.value.__cause__, sqlite3.DatabaseError)
    # The first call of a store made without `open` says the same.
    store = SQLiteRuntimeStore(notes)
    with pytest.raises(UserError, match="is not a dex-agents SQLite store"):
        await store.list_snapshots()
    await store.close()
    assert notes.read_text() == "these are notes, not a database\n" * 10

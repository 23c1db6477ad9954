import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from uuid import uuid4

import pytest

from dex_agents.session import StoredMessage
from dex_agents.session._events import EventRecord
from dex_agents.session._json import JsonObject
from dex_agents.stores import RuntimeStore, SQLiteRuntimeStore
from dex_agents.stores._memory import InMemoryRuntimeStore
from dex_agents.stores._protocols import SegmentConflictError
from dex_agents.testing import run_runtime_store_conformance

_WRITER = """
import asyncio, sys
from dex_agents.session._events import EventRecord
from dex_agents.stores import SQLiteRuntimeStore

async def main(path: str, writer: str, count: int) -> None:
    store = await SQLiteRuntimeStore.open(path)
    try:
        for seq in range(count):
            event = EventRecord(
                session_id="shared", turn_id=writer, step_execution_id="step",
                attempt=1, seq=seq, type="text_delta", data={"text": f"{writer} {seq}"},
            )
            await store.append_events([event])
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_in_memory_store_conforms() -> None:
    async def make() -> RuntimeStore:
        return InMemoryRuntimeStore()

    await run_runtime_store_conformance(make)


async def test_sqlite_store_conforms(tmp_path: Path) -> None:
    async def make() -> RuntimeStore:
        return await SQLiteRuntimeStore.open(tmp_path / f"{uuid4()}.sqlite")

    await run_runtime_store_conformance(make)


async def test_sqlite_store_uses_wal_and_creates_parent_directories(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "nested" / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(path)
    await store.close()
    with sqlite3.connect(path) as conn:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    assert mode == "wal"


async def test_sqlite_store_data_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(path)  # lazy: the first call creates the file
    await store.put_snapshot("s1", {"version": 1})
    await store.append_events([_event("s1", 0)])
    await store.close()

    reopened = await SQLiteRuntimeStore.open(path)
    try:
        assert await reopened.get_snapshot("s1") == {"version": 1}
        assert await reopened.append_events([_event("s1", 1)]) == [2]
    finally:
        await reopened.close()


async def test_follow_sees_events_written_by_other_processes(tmp_path: Path) -> None:
    path = tmp_path / "runtime.sqlite"
    follower = await SQLiteRuntimeStore.open(path)
    count = 60
    received: list[EventRecord] = []

    async def follow() -> None:
        async for event in follower.follow_events("shared", poll_interval=0.005):
            received.append(event)
            if len(received) == 2 * count:
                return

    task = asyncio.create_task(follow())
    # Two writer processes contend for the cursor allocation while we follow.
    writers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, str(path), name, str(count)
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


async def test_sqlite_concurrent_appends_get_unique_cursors(tmp_path: Path) -> None:
    store = await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    try:
        batches = await asyncio.gather(
            *(
                store.append_events([_event("s1", i), _event("s1", i)])
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
    async def make() -> RuntimeStore:
        return store_type()

    with pytest.raises(AssertionError, match=rule):
        await run_runtime_store_conformance(make, follow_deadline=0.5)


async def test_a_looping_chain_fails_instead_of_hanging(tmp_path: Path) -> None:
    # Only corrupt parent links loop: each segment names a parent written later.
    for store in (InMemoryRuntimeStore(), SQLiteRuntimeStore(tmp_path / "x.sqlite")):
        try:
            await store.put_segment("s1", "a", "b", [])
            await store.put_segment("s1", "b", "a", [])
            await store.put_segment("s1", "self", "self", [])
            for head in ("a", "self"):
                with pytest.raises(ValueError, match="loops"):
                    async with asyncio.timeout(5):
                        await store.read_transcript("s1", head)
        finally:
            await store.close()


async def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    for store in (InMemoryRuntimeStore(), SQLiteRuntimeStore(tmp_path / "x.sqlite")):
        await store.close()
        await store.close()  # idempotent
        with pytest.raises(Exception, match="closed"):
            await store.read_events("s1")


async def test_snapshot_version_must_be_an_int() -> None:
    store = InMemoryRuntimeStore()
    with pytest.raises(Exception, match="version"):
        await store.put_snapshot("s1", {"version": "2"})


def _event(session_id: str, seq: int) -> EventRecord:
    return EventRecord(
        session_id=session_id,
        turn_id="t",
        step_execution_id="s",
        attempt=1,
        seq=seq,
        type="text_delta",
        data={},
    )

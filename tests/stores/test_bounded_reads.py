"""Blobs, the turn log and bounded transcript reads: costs, sizes and broken stores."""

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest

from dex_agents import UserError
from dex_agents.session import StoredMessage
from dex_agents.session._json import JsonObject
from dex_agents.stores import RuntimeStore, SQLiteRuntimeStore
from dex_agents.stores._memory import InMemoryRuntimeStore
from dex_agents.stores._protocols import BlobConflictError
from dex_agents.stores._sqlite import _CHAIN
from dex_agents.testing import run_runtime_store_conformance


def _msg(text: str) -> StoredMessage:
    return StoredMessage(role="assistant", text=text, item={"kind": "test"})


async def test_sqlite_reads_the_tail_of_3000_segments_and_the_newest_turns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(path)
    try:
        parent: str | None = None
        for i in range(1, 3001):
            await store.put_segment("s1", f"seg-{i}", parent, [_msg(f"m{i}")])
            parent = f"seg-{i}"
        for i in range(1, 3001):
            await store.put_turn("s1", i, {"turn": i})

        tail = await store.read_transcript("s1", "seg-3000", max_segments=3)
        assert [m.text for m in tail] == ["m2998", "m2999", "m3000"]
        whole = await store.read_transcript("s1", "seg-3000")
        assert [m.text for m in whole] == [f"m{i}" for i in range(1, 3001)]

        turns = await store.read_turns("s1", limit=5)
        assert [t["turn"] for t in turns] == [3000, 2999, 2998, 2997, 2996]
        page = await store.read_turns("s1", before=10, limit=5)
        assert [t["turn"] for t in page] == [9, 8, 7, 6, 5]
        assert await store.count_turns("s1") == 3000
    finally:
        await store.close()

    # The recursion itself stops after N segments: count SQLite's VM steps.
    with contextlib.closing(sqlite3.connect(path)) as conn:

        def steps(max_segments: int | None) -> tuple[int, int]:
            count = 0

            def tick() -> int:
                nonlocal count
                count += 1
                return 0

            conn.set_progress_handler(tick, 1)
            try:
                params = {
                    "session_id": "s1",
                    "head_id": "seg-3000",
                    "max_segments": max_segments,
                }
                rows = conn.execute(_CHAIN, params).fetchall()
            finally:
                conn.set_progress_handler(None, 1)
            return len(rows), count

        tail_rows, tail_steps = steps(3)
        whole_rows, whole_steps = steps(None)
        assert (tail_rows, whole_rows) == (3, 3000)
        assert tail_steps * 100 < whole_steps, (tail_steps, whole_steps)

        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT body FROM turns"
            " WHERE session_id = ? AND number < ? ORDER BY number DESC LIMIT ?",
            ("s1", 10, 5),
        ).fetchall()
        details = " ".join(str(row[-1]) for row in plan)
        assert "number<?" in details and "TEMP B-TREE" not in details, details


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_40_mb_blob_round_trips(tmp_path: Path, kind: str) -> None:
    store: RuntimeStore = (
        InMemoryRuntimeStore()
        if kind == "memory"
        else await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    )
    data = bytes(range(256)) * (40 * 1024 * 1024 // 256) + b"tail"
    try:
        await store.put_blob("s1", "big", data)
        await store.put_blob("s1", "big", data)  # a retry
        assert await store.get_blob("s1", "big") == data
        with pytest.raises(BlobConflictError, match="'big'.*'s1'"):
            await store.put_blob("s1", "big", data[:-1])
    finally:
        await store.close()


async def test_the_memory_store_keeps_its_own_copy_of_a_bytearray() -> None:
    store = InMemoryRuntimeStore()
    data = bytearray(b"original")
    # Outside the contract (bytes), but a caller's bytearray must not alias the store.
    await store.put_blob("s1", "b", data)  # pyright: ignore[reportArgumentType]
    data[:] = b"mutated!"
    assert await store.get_blob("s1", "b") == b"original"


async def test_a_looping_chain_fails_within_max_segments(tmp_path: Path) -> None:
    for store in (InMemoryRuntimeStore(), SQLiteRuntimeStore(tmp_path / "x.sqlite")):
        try:
            await store.put_segment("s1", "a", "b", [_msg("a")])
            await store.put_segment("s1", "b", "a", [_msg("b")])
            await store.put_segment("s1", "self", "self", [_msg("self")])
            for head, max_segments in (("a", 3), ("a", 1000), ("self", 2)):
                with pytest.raises(ValueError, match="loops"):
                    async with asyncio.timeout(5):
                        await store.read_transcript(
                            "s1", head, max_segments=max_segments
                        )
            # Cut before it loops, the chain is simply its newest segments.
            tail = await store.read_transcript("s1", "a", max_segments=2)
            assert [m.text for m in tail] == ["b", "a"]
        finally:
            await store.close()


async def test_a_sqlite_file_from_before_blobs_and_turns_gains_their_tables(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TABLE segments (session_id TEXT NOT NULL, segment_id TEXT NOT"
            " NULL, parent_id TEXT, body TEXT NOT NULL, created_at REAL NOT NULL,"
            " PRIMARY KEY (session_id, segment_id))"
        )
        conn.execute("INSERT INTO segments VALUES ('s1', 'root', NULL, '[]', 0)")
        conn.commit()
    store = await SQLiteRuntimeStore.open(path)
    try:
        assert await store.read_transcript("s1", "root", max_segments=1) == []
        await store.put_turn("s1", 1, {"turn": 1})
        await store.put_blob("s1", "b", b"x")
        assert await store.read_turns("s1") == [{"turn": 1}]
        assert await store.get_blob("s1", "b") == b"x"
    finally:
        await store.close()


async def test_turn_numbers_and_limits_are_checked_with_user_errors() -> None:
    store = InMemoryRuntimeStore()
    with pytest.raises(UserError, match="`limit` must be at least 1, got 0"):
        await store.read_turns("s1", limit=0)
    with pytest.raises(UserError, match="`max_segments` must be at least 1"):
        await store.read_transcript("s1", None, max_segments=0)
    for bad in (0, -3, True):
        with pytest.raises(UserError, match="turn number must be an int"):
            await store.put_turn("s1", bad, {})
    assert await store.count_turns("s1") == 0


class _OldestFirstTurnsStore(InMemoryRuntimeStore):
    async def read_turns(
        self, session_id: str, *, before: int | None = None, limit: int = 20
    ) -> list[JsonObject]:
        turns = await super().read_turns(session_id, before=before, limit=limit)
        return turns[::-1]


class _FirstWriteWinsTurnsStore(InMemoryRuntimeStore):
    async def put_turn(self, session_id: str, number: int, turn: JsonObject) -> None:
        if number not in self._turns.get(session_id, {}):
            await super().put_turn(session_id, number, turn)


class _EmptyPageStore(InMemoryRuntimeStore):
    async def read_turns(
        self, session_id: str, *, before: int | None = None, limit: int = 20
    ) -> list[JsonObject]:
        if limit < 1:
            return []
        return await super().read_turns(session_id, before=before, limit=limit)


class _OverwritingBlobStore(InMemoryRuntimeStore):
    async def put_blob(self, session_id: str, blob_id: str, data: bytes) -> None:
        self._blobs.pop((session_id, blob_id), None)
        await super().put_blob(session_id, blob_id, data)


class _VagueMissingBlobStore(InMemoryRuntimeStore):
    async def get_blob(self, session_id: str, blob_id: str) -> bytes:
        try:
            return await super().get_blob(session_id, blob_id)
        except KeyError:
            raise KeyError("no such blob") from None


class _WholeChainStore(InMemoryRuntimeStore):
    async def read_transcript(
        self, session_id: str, head_id: str | None, *, max_segments: int | None = None
    ) -> list[StoredMessage]:
        return await super().read_transcript(session_id, head_id)


class _NewestFirstTailStore(InMemoryRuntimeStore):
    async def read_transcript(
        self, session_id: str, head_id: str | None, *, max_segments: int | None = None
    ) -> list[StoredMessage]:
        messages = await super().read_transcript(
            session_id, head_id, max_segments=max_segments
        )
        return messages if max_segments is None else messages[::-1]


@pytest.mark.parametrize(
    ("store_type", "rule"),
    [
        (_OldestFirstTurnsStore, "newest first"),
        (_FirstWriteWinsTurnsStore, "replaces the turn"),
        (_EmptyPageStore, r"read_turns\(limit=0\) raises UserError"),
        (_OverwritingBlobStore, "raises `BlobConflictError`"),
        (_VagueMissingBlobStore, "names the session and the blob"),
        (_WholeChainStore, "newest segments of the chain"),
        (_NewestFirstTailStore, r"max_segments=2\) returns the newest segments"),
    ],
)
async def test_conformance_catches_broken_blob_turn_and_tail_stores(
    store_type: type[InMemoryRuntimeStore], rule: str
) -> None:
    async def make() -> RuntimeStore:
        return store_type()

    with pytest.raises(AssertionError, match=rule):
        await run_runtime_store_conformance(make, follow_deadline=0.5)

"""Blobs, the turn log and bounded transcript reads: costs, sizes and broken stores.

The tests taking `backend` or `any_backend` run on SQLite and PostgreSQL (and memory).
"""

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any, LiteralString, cast

import pytest

from dex_agents import UserError
from dex_agents.session import StoredMessage
from dex_agents.session._json import JsonObject
from dex_agents.stores._memory import InMemoryRuntimeStore
from dex_agents.stores._postgres import _chain
from dex_agents.stores._protocols import BlobConflictError
from dex_agents.stores._rules import MESSAGES
from dex_agents.stores._sqlite import _CHAIN
from support.store_backends import Backend, assert_conformance_catches, msg

# PostgreSQL writes a segment per round trip: a shorter chain keeps its run short.
_CHAIN_LENGTH = {"sqlite": 3000, "postgres": 1000}


async def test_the_tail_of_a_long_chain_reads_only_its_segments(
    backend: Backend,
) -> None:
    n = _CHAIN_LENGTH[backend.kind]
    store = await backend.open()
    try:
        parent: str | None = None
        for i in range(1, n + 1):
            await store.put_segment("s1", f"seg-{i}", parent, [msg(f"m{i}")])
            parent = f"seg-{i}"
        for i in range(1, n + 1):
            await store.put_turn("s1", i, {"turn": i})

        tail = await store.read_transcript("s1", f"seg-{n}", max_segments=3)
        assert [m.text for m in tail] == [f"m{n - 2}", f"m{n - 1}", f"m{n}"]
        whole = await store.read_transcript("s1", f"seg-{n}")
        assert [m.text for m in whole] == [f"m{i}" for i in range(1, n + 1)]

        turns = await store.read_turns("s1", limit=5)
        assert [t["turn"] for t in turns] == [n, n - 1, n - 2, n - 3, n - 4]
        page = await store.read_turns("s1", before=10, limit=5)
        assert [t["turn"] for t in page] == [9, 8, 7, 6, 5]
        assert await store.count_turns("s1") == n
    finally:
        await store.close()

    # The recursion itself stops after N segments; each backend shows it its own way.
    if backend.kind == "sqlite":
        _sqlite_chain_steps_stop_at_the_tail(Path(backend.location), n)
    else:
        await _postgres_chain_rows_stop_at_the_tail(backend, n)


def _sqlite_chain_steps_stop_at_the_tail(path: Path, n: int) -> None:
    """Count SQLite's VM steps, and check the turn page uses the index."""
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
                    "head_id": f"seg-{n}",
                    "max_segments": max_segments,
                }
                rows = conn.execute(_CHAIN, params).fetchall()
            finally:
                conn.set_progress_handler(None, 1)
            return len(rows), count

        tail_rows, tail_steps = steps(3)
        whole_rows, whole_steps = steps(None)
        assert (tail_rows, whole_rows) == (3, n)
        assert tail_steps * 100 < whole_steps, (tail_steps, whole_steps)

        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT body FROM turns"
            " WHERE session_id = ? AND number < ? ORDER BY number DESC LIMIT ?",
            ("s1", 10, 5),
        ).fetchall()
        details = " ".join(str(row[-1]) for row in plan)
        assert "number<?" in details and "TEMP B-TREE" not in details, details


async def _postgres_chain_rows_stop_at_the_tail(backend: Backend, n: int) -> None:
    """Delete an old segment, then read the store's own query's EXPLAIN ANALYZE."""
    import psycopg
    from psycopg import sql

    # Only a read that walked as far as seg-10 would miss it.
    async with await psycopg.AsyncConnection.connect(
        backend.location, autocommit=True
    ) as conn:
        await conn.execute(
            sql.SQL("DELETE FROM {} WHERE segment_id = 'seg-10'").format(
                sql.Identifier(f"{backend.prefix}segments")
            )
        )
    store = await backend.open()
    try:
        tail = await store.read_transcript("s1", f"seg-{n}", max_segments=n - 10)
        assert len(tail) == n - 10 and tail[0].text == "m11"
        with pytest.raises(KeyError, match="seg-10"):
            await store.read_transcript("s1", f"seg-{n}", max_segments=n - 9)
    finally:
        await store.close()

    # The recursion produces N rows, not the whole chain's.
    async with await psycopg.AsyncConnection.connect(
        backend.location, autocommit=True
    ) as conn:
        for limit, rows in ((3, 3), (None, n - 10)):  # seg-10 is gone
            cur = await conn.execute(
                cast(
                    LiteralString,
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {_chain(backend.prefix)}",
                ),
                {"s": "s1", "h": f"seg-{n}", "n": limit},
            )
            row = await cur.fetchone()
            assert row is not None
            plan: Any = row[0] if isinstance(row[0], list) else json.loads(row[0])
            assert plan[0]["Plan"]["Actual Rows"] == rows
            recursion = _nodes(plan[0]["Plan"], "Recursive Union")
            assert [node["Actual Rows"] for node in recursion] == [rows]


def _nodes(plan: dict[str, Any], node_type: str) -> list[dict[str, Any]]:
    """Every node of `node_type` in an EXPLAIN (FORMAT JSON) plan tree."""
    found = [plan] if plan.get("Node Type") == node_type else []
    for child in plan.get("Plans", []):
        found.extend(_nodes(child, node_type))
    return found


async def test_a_40_mb_blob_round_trips(any_backend: Backend) -> None:
    store = await any_backend.open()
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


async def test_a_looping_chain_fails_within_max_segments(any_backend: Backend) -> None:
    # Only corrupt parent links loop: each segment names a parent written later.
    store = any_backend.lazy()
    try:
        await store.put_segment("s1", "a", "b", [msg("a")])
        await store.put_segment("s1", "b", "a", [msg("b")])
        await store.put_segment("s1", "self", "self", [msg("self")])
        for head in ("a", "self"):
            for max_segments in (2 if head == "self" else 3, 1000, None):
                with pytest.raises(ValueError, match="loops"):
                    async with asyncio.timeout(5):  # fails instead of hanging
                        await store.read_transcript(
                            "s1", head, max_segments=max_segments
                        )
        # Cut before it loops, the chain is simply its newest segments.
        tail = await store.read_transcript("s1", "a", max_segments=2)
        assert [m.text for m in tail] == ["b", "a"]
    finally:
        await store.close()


async def _sqlite_file_from_before_blobs_and_turns(
    backend: Backend,
) -> list[StoredMessage]:
    with contextlib.closing(sqlite3.connect(backend.location)) as conn:
        conn.execute(
            "CREATE TABLE segments (session_id TEXT NOT NULL, segment_id TEXT NOT"
            " NULL, parent_id TEXT, body TEXT NOT NULL, created_at REAL NOT NULL,"
            " PRIMARY KEY (session_id, segment_id))"
        )
        body = MESSAGES.dump_json([msg("kept")]).decode()
        conn.execute("INSERT INTO segments VALUES ('s1', 'root', NULL, ?, 0)", (body,))
        conn.commit()
    return [msg("kept")]


async def _postgres_tables_from_before_blobs_and_turns(
    backend: Backend,
) -> list[StoredMessage]:
    import psycopg
    from psycopg import sql

    first = await backend.open()
    await first.put_segment("s1", "root", None, [msg("kept")])
    await first.close()
    async with await psycopg.AsyncConnection.connect(
        backend.location, autocommit=True
    ) as conn:
        await conn.execute(
            sql.SQL("DROP TABLE {}, {}").format(
                sql.Identifier(f"{backend.prefix}blobs"),
                sql.Identifier(f"{backend.prefix}turns"),
            )
        )
    return [msg("kept")]


# Each backend's tables as a release before blobs and turns left them, with the
# transcript of their one segment, "root".
_OLD_TABLES = {
    "sqlite": _sqlite_file_from_before_blobs_and_turns,
    "postgres": _postgres_tables_from_before_blobs_and_turns,
}


async def test_tables_from_before_blobs_and_turns_gain_them_on_open(
    backend: Backend,
) -> None:
    kept = await _OLD_TABLES[backend.kind](backend)
    store = await backend.open()
    try:
        assert await store.read_transcript("s1", "root", max_segments=1) == kept
        assert await store.read_transcript("s1", "root") == kept
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
    await assert_conformance_catches(store_type, rule)

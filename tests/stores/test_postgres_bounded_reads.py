"""`PostgresRuntimeStore` blobs, turn log and bounded transcript reads on a real server."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, LiteralString, cast

import psycopg
import pytest
from psycopg import sql

from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.session import StoredMessage
from dex_agents.stores._postgres import _chain
from dex_agents.stores._protocols import BlobConflictError
from dex_agents.testing._postgres_server import PostgresTestServer


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}_"


def _msg(text: str) -> StoredMessage:
    return StoredMessage(role="assistant", text=text, item={"kind": "test"})


async def test_a_40_mb_blob_round_trips(postgres_server: PostgresTestServer) -> None:
    store = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=_prefix())
    data = bytes(range(256)) * (40 * 1024 * 1024 // 256) + b"tail"
    try:
        await store.put_blob("s1", "big", data)
        await store.put_blob("s1", "big", data)  # a retry
        assert await store.get_blob("s1", "big") == data
        with pytest.raises(BlobConflictError, match="'big'.*'s1'"):
            await store.put_blob("s1", "big", data[:-1])
    finally:
        await store.close()


async def test_the_tail_of_a_long_chain_reads_only_its_segments(
    postgres_server: PostgresTestServer,
) -> None:
    prefix = _prefix()
    store = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    try:
        parent: str | None = None
        for i in range(1, 1001):
            await store.put_segment("s1", f"seg-{i}", parent, [_msg(f"m{i}")])
            parent = f"seg-{i}"
        for i in range(1, 1001):
            await store.put_turn("s1", i, {"turn": i})
        tail = await store.read_transcript("s1", "seg-1000", max_segments=3)
        assert [m.text for m in tail] == ["m998", "m999", "m1000"]
        whole = await store.read_transcript("s1", "seg-1000")
        assert [m.text for m in whole] == [f"m{i}" for i in range(1, 1001)]
        turns = await store.read_turns("s1", limit=5)
        assert [t["turn"] for t in turns] == [1000, 999, 998, 997, 996]
        assert await store.count_turns("s1") == 1000
    finally:
        await store.close()

    # Delete an old segment: only a read that walked that far would miss it.
    async with await psycopg.AsyncConnection.connect(
        postgres_server.dsn, autocommit=True
    ) as conn:
        await conn.execute(
            sql.SQL("DELETE FROM {} WHERE segment_id = 'seg-10'").format(
                sql.Identifier(f"{prefix}segments")
            )
        )
    store = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    try:
        tail = await store.read_transcript("s1", "seg-1000", max_segments=990)
        assert len(tail) == 990 and tail[0].text == "m11"
        with pytest.raises(KeyError, match="seg-10"):
            await store.read_transcript("s1", "seg-1000", max_segments=991)
    finally:
        await store.close()

    # The store's own query: the recursion produces N rows, not the whole chain's.
    async with await psycopg.AsyncConnection.connect(
        postgres_server.dsn, autocommit=True
    ) as conn:
        for n, rows in ((3, 3), (None, 990)):  # seg-10 is gone: 990 remain
            cur = await conn.execute(
                cast(LiteralString, f"EXPLAIN (ANALYZE, FORMAT JSON) {_chain(prefix)}"),
                {"s": "s1", "h": "seg-1000", "n": n},
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


async def test_a_looping_chain_fails_within_max_segments(
    postgres_server: PostgresTestServer,
) -> None:
    store = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=_prefix())
    try:
        await store.put_segment("s1", "a", "b", [_msg("a")])
        await store.put_segment("s1", "b", "a", [_msg("b")])
        await store.put_segment("s1", "self", "self", [_msg("self")])
        for head, max_segments in (("a", 3), ("a", 1000), ("self", 2), ("self", None)):
            with pytest.raises(ValueError, match="loops"):
                async with asyncio.timeout(5):
                    await store.read_transcript("s1", head, max_segments=max_segments)
        tail = await store.read_transcript("s1", "a", max_segments=2)
        assert [m.text for m in tail] == ["b", "a"]
    finally:
        await store.close()


async def test_tables_from_before_blobs_and_turns_gain_them_on_open(
    postgres_server: PostgresTestServer,
) -> None:
    prefix = _prefix()
    first = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    await first.put_segment("s1", "root", None, [_msg("kept")])
    await first.close()
    async with await psycopg.AsyncConnection.connect(
        postgres_server.dsn, autocommit=True
    ) as conn:
        await conn.execute(
            sql.SQL("DROP TABLE {}, {}").format(
                sql.Identifier(f"{prefix}blobs"), sql.Identifier(f"{prefix}turns")
            )
        )
    second = await PostgresRuntimeStore.open(postgres_server.dsn, table_prefix=prefix)
    try:
        assert await second.read_transcript("s1", "root") == [_msg("kept")]
        await second.put_turn("s1", 1, {"turn": 1})
        await second.put_blob("s1", "b", b"x")
        assert await second.read_turns("s1") == [{"turn": 1}]
        assert await second.get_blob("s1", "b") == b"x"
    finally:
        await second.close()

"""The stores the tests of `tests/stores` run against: memory, a SQLite file, PostgreSQL.

`tests/stores/conftest.py` turns them into the `backend` (SQLite, PostgreSQL) and `any_backend`
(the in-memory store too) fixtures; the test's id names the backend.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.session import StoredMessage
from dex_agents.session._events import EventRecord
from dex_agents.stores import RuntimeStore, SQLiteRuntimeStore
from dex_agents.stores._memory import InMemoryRuntimeStore
from dex_agents.testing import run_runtime_store_conformance
from dex_agents.testing._postgres_server import PostgresTestServer

Kind = Literal["memory", "sqlite", "postgres"]


def table_prefix() -> str:
    """A fresh set of tables per store: each test starts empty in one database."""
    return f"t{uuid.uuid4().hex[:12]}_"


def text_event(session_id: str, seq: int) -> EventRecord:
    return EventRecord(
        session_id=session_id,
        turn_id="turn-1",
        step_execution_id="step",
        attempt=1,
        seq=seq,
        type="text_delta",
        data={"text": str(seq)},
    )


def msg(text: str) -> StoredMessage:
    return StoredMessage(role="assistant", text=text, item={"kind": "test"})


@dataclass
class Backend:
    """One test's store location: a SQLite file, or a set of PostgreSQL tables.

    Every store `open()` or `lazy()` returns is a new object on the same location,
    as another process or machine would open it; the in-memory store has no
    location, so each of its stores is a new, empty one.
    """

    kind: Kind
    tmp_path: Path
    server: PostgresTestServer | None = None
    prefix: str = field(default_factory=table_prefix)

    @property
    def postgres(self) -> PostgresTestServer:
        assert self.server is not None, f"the {self.kind} backend has no server"
        return self.server

    @property
    def location(self) -> str:
        """The SQLite file's path or the PostgreSQL DSN."""
        if self.kind == "sqlite":
            return str(self.tmp_path / "runtime.sqlite")
        if self.kind == "postgres":
            return self.postgres.dsn
        raise AssertionError("the in-memory store has no location")

    def lazy(self) -> RuntimeStore:
        """A store that connects (or creates its file) on its first call."""
        if self.kind == "sqlite":
            return SQLiteRuntimeStore(self.location)
        if self.kind == "postgres":
            return PostgresRuntimeStore(self.location, table_prefix=self.prefix)
        return InMemoryRuntimeStore()

    async def open(self) -> RuntimeStore:
        if self.kind == "sqlite":
            return await SQLiteRuntimeStore.open(self.location)
        if self.kind == "postgres":
            return await PostgresRuntimeStore.open(
                self.location, table_prefix=self.prefix
            )
        return InMemoryRuntimeStore()

    async def open_fresh(self) -> RuntimeStore:
        """A store on a new, empty location of this backend."""
        if self.kind == "sqlite":
            return await SQLiteRuntimeStore.open(
                self.tmp_path / f"{uuid.uuid4()}.sqlite"
            )
        if self.kind == "postgres":
            return await PostgresRuntimeStore.open(
                self.location, table_prefix=table_prefix()
            )
        return InMemoryRuntimeStore()


async def assert_conformance_catches(
    store_type: type[InMemoryRuntimeStore], rule: str
) -> None:
    """The conformance suite fails a broken store, naming the rule it breaks."""

    async def make() -> RuntimeStore:
        return store_type()

    with pytest.raises(AssertionError, match=rule):
        await run_runtime_store_conformance(make, follow_deadline=0.5)

"""The `backend` and `any_backend` fixtures: one test body, run on every store.

The PostgreSQL runs take the session's `postgres_server` (`tests/support/
postgres_support.py`), so they skip where PostgreSQL is missing, or fail under
`DEX_AGENTS_POSTGRES_REQUIRED=1`, while the other backends still run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.testing._postgres_server import PostgresTestServer
from support.store_backends import Backend, Kind


def _backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    kind: Kind = request.param
    server: PostgresTestServer | None = (
        request.getfixturevalue("postgres_server") if kind == "postgres" else None
    )
    return Backend(kind, tmp_path, server)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A durable store location: a SQLite file, or PostgreSQL tables of their own."""
    return _backend(request, tmp_path)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """`backend`, and the in-memory store as well."""
    return _backend(request, tmp_path)

"""A real PostgreSQL server for the run; skipped where none is installed, unless required."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from dex_agents.testing import PostgresNotAvailable, PostgresTestServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresTestServer]:
    """One throwaway cluster; `.ci/run` sets DEX_AGENTS_POSTGRES_REQUIRED=1 so CI cannot skip."""
    try:
        server = PostgresTestServer()
    except PostgresNotAvailable as e:
        if os.environ.get("DEX_AGENTS_POSTGRES_REQUIRED") == "1":
            pytest.fail(f"DEX_AGENTS_POSTGRES_REQUIRED=1 but {e}")
        pytest.skip(str(e))
    with server:
        yield server

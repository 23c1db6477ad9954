"""A real PostgreSQL server for the run; skipped where none is installed, unless required."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dex_agents.testing._postgres_server import PostgresTestServer
from support.postgres_support import postgres_or_skip


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresTestServer]:
    """One throwaway cluster; `.ci/run` sets DEX_AGENTS_POSTGRES_REQUIRED=1 so CI cannot skip."""
    with postgres_or_skip() as server:
        yield server

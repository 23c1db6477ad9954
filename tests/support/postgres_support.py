"""A throwaway PostgreSQL cluster for a test, or a skip where none is installed.

`.ci/run` sets DEX_AGENTS_POSTGRES_REQUIRED=1, so CI fails instead of skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from dex_agents.testing._postgres_server import PostgresNotAvailable, PostgresTestServer


@contextmanager
def postgres_or_skip() -> Iterator[PostgresTestServer]:
    """A started cluster, stopped on exit; skips the test where PostgreSQL is missing."""
    try:
        server = PostgresTestServer()
    except PostgresNotAvailable as e:
        if os.environ.get("DEX_AGENTS_POSTGRES_REQUIRED") == "1":
            pytest.fail(f"DEX_AGENTS_POSTGRES_REQUIRED=1 but {e}")
        pytest.skip(str(e))
    with server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresTestServer]:
    """One throwaway cluster for the run; `.ci/run` sets DEX_AGENTS_POSTGRES_REQUIRED=1 so CI cannot skip."""
    with postgres_or_skip() as server:
        yield server

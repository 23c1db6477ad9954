"""Fixtures for running the bundled Claude Code CLI against the mock Messages API.

`cli_path` skips a test where the CLI is missing (fails it where
`DEX_AGENTS_REAL_CLI_REQUIRED=1`, as in CI); `api` and `proxy` are the only
network the CLI can reach; `real_cli_env` is its hermetic environment.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.testing._hermetic import (
    bundled_cli_path,
    hermetic_cli_env,
    is_scrubbed_variable,
)
from dex_agents.testing._refusing_proxy import RefusingProxy


def require_bundled_cli() -> Path:
    """The bundled CLI; skips without it unless DEX_AGENTS_REAL_CLI_REQUIRED=1."""
    path = bundled_cli_path()
    if path is None:
        message = (
            "the bundled Claude Code CLI (claude_agent_sdk/_bundled/claude) is missing"
        )
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail(f"{message} and DEX_AGENTS_REAL_CLI_REQUIRED=1")
        pytest.skip(message)
    return path


@pytest.fixture
def cli_path() -> Path:
    """The bundled CLI (see `require_bundled_cli`)."""
    return require_bundled_cli()


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def api() -> AsyncIterator[MockMessagesApi]:
    """The scripted Messages API the CLI talks to."""
    async with MockMessagesApi() as api:
        yield api


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def proxy() -> AsyncIterator[RefusingProxy]:
    """A proxy that refuses everything; the test fails if anything tried it."""
    async with RefusingProxy() as proxy:
        yield proxy
        assert proxy.attempts == [], proxy.attempts


@pytest.fixture
def scrubbed_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop credentials, settings and proxies the SDK would merge into the CLI env."""
    for name in list(os.environ):
        if is_scrubbed_variable(name):
            monkeypatch.delenv(name)


@pytest.fixture
def real_cli_env(
    tmp_path: Path,
    scrubbed_environ: None,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> dict[str, str]:
    """A hermetic CLI environment (and a scrubbed os.environ: the SDK merges options.env over it)."""
    return hermetic_cli_env(tmp_path / "cli", api=api, proxy=proxy)

"""Fixtures for running the bundled Claude Code CLI against the mock Messages API."""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.testing._hermetic import (
    bundled_cli_path,
    hermetic_cli_env,
    is_scrubbed_variable,
)
from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.testing._refusing_proxy import RefusingProxy


@pytest.fixture
def cli_path() -> Path:
    """The bundled CLI; skips without it unless DEX_AGENTS_REAL_CLI_REQUIRED=1."""
    path = bundled_cli_path()
    if path is None:
        message = "claude_agent_sdk/_bundled/claude is missing"
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail(f"{message} and DEX_AGENTS_REAL_CLI_REQUIRED=1")
        pytest.skip(message)
    return path


@pytest.fixture
async def api() -> AsyncIterator[MockMessagesApi]:
    async with MockMessagesApi() as api:
        yield api


@pytest.fixture
async def proxy() -> AsyncIterator[RefusingProxy]:
    async with RefusingProxy() as proxy:
        yield proxy


@pytest.fixture
def cli_env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> dict[str, str]:
    """A hermetic CLI environment.

    Also scrubs os.environ: the SDK merges options.env over it.
    """
    for name in list(os.environ):
        if is_scrubbed_variable(name):
            monkeypatch.delenv(name)
    return hermetic_cli_env(tmp_path / "cli", api=api, proxy=proxy)

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.claude_harness import Hermetic

from dex_agents.testing._hermetic import (
    bundled_cli_path,
    hermetic_cli_env,
    is_scrubbed_variable,
)
from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.testing._refusing_proxy import RefusingProxy


def _require_real_cli() -> None:
    if bundled_cli_path() is None:
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail("the bundled Claude Code CLI is missing")
        pytest.skip("the bundled Claude Code CLI is missing")


@pytest.fixture
def scrubbed_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop credentials, settings and proxies the SDK would merge into the CLI env."""
    for name in list(os.environ):
        if is_scrubbed_variable(name):
            monkeypatch.delenv(name)


@pytest_asyncio.fixture
async def hermetic(tmp_path: Path, scrubbed_environ: None) -> AsyncIterator[Hermetic]:
    _require_real_cli()
    async with MockMessagesApi() as api, RefusingProxy() as proxy:
        yield Hermetic(
            api=api,
            proxy=proxy,
            env=hermetic_cli_env(tmp_path, api=api, proxy=proxy),
            base=tmp_path,
        )
        assert api.unserved == [], api.unserved
        assert proxy.attempts == [], proxy.attempts

"""Fixtures: the README's support agent on the dev server, the real CLI, the scripted API."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.claude_rig import EXAMPLES, ClaudeRig, worker_process

from dex_agents.temporal import EmbeddedEngine
from dex_agents.testing import MockMessagesApi, WorkerProcess
from dex_agents.testing._hermetic import bundled_cli_path, hermetic_cli_env
from dex_agents.testing._refusing_proxy import RefusingProxy


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def claude_rig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ClaudeRig]:
    """The example agent's module, with its CLI pointed at the scripted Messages API."""
    if bundled_cli_path() is None:
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail("the bundled Claude Code CLI is missing")
        pytest.skip("the bundled Claude Code CLI is missing")
    async with MockMessagesApi() as api, RefusingProxy() as proxy:
        env = hermetic_cli_env(tmp_path, api=api, proxy=proxy)
        env["DEX_AGENTS_EXAMPLE_DB"] = str(tmp_path / "support.sqlite")
        env["DEX_AGENTS_EXAMPLE_WORKDIR"] = str(tmp_path / "agents")
        for name in list(os.environ):
            if name not in env:
                monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.syspath_prepend(str(EXAMPLES))
        sys.modules.pop("support_agent", None)
        support_agent = importlib.import_module("support_agent")

        yield ClaudeRig(
            api=api, proxy=proxy, env=env, tmp=tmp_path, example=support_agent
        )
        assert api.unserved == [], api.unserved
        assert proxy.attempts == [], proxy.attempts


@pytest.fixture
def worker(claude_rig: ClaudeRig, engine: EmbeddedEngine) -> Iterator[WorkerProcess]:
    """A worker subprocess serving the example agent, on the rig's store; killable."""
    with worker_process(claude_rig, engine, "support_agent:flow", EXAMPLES) as process:
        yield process

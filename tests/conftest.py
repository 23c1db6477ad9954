"""Shared fixtures: a hermetic environment and one embedded Temporal dev server per run.

Every other fixture lives in the harness, `tests/support/`, and is registered here
once, so a test in any folder can use any of them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from dex_agents.temporal import EmbeddedEngine

pytest_plugins = [
    # Listed before the modules that import it, so pytest can rewrite its asserts.
    "support.session_harness",  # harness
    "support.bundled_cli",  # cli_path, api, proxy, scrubbed_environ, real_cli_env
    "support.claude_harness",  # hermetic
    "support.claude_rig",  # claude_rig, example_worker
    "support.cli_harness",  # no_dex_agents_settings, served, cli_worker
    "support.fake_suite_rig",  # suite
    "support.postgres_support",  # postgres_server
    "support.web_rig",  # rig
    "support.browser",  # browser
    "support.wheel_venv",  # wheel
]

_SCRUB_PREFIXES = ("ANTHROPIC_", "CLAUDE_")
_SCRUB_NAMES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy")


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test can reach a real model: dummy key, temporary HOME and config dir."""
    for name in list(os.environ):
        if name.startswith(_SCRUB_PREFIXES) or name in _SCRUB_NAMES:
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-key-for-tests")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield


@pytest_asyncio.fixture(scope="session")  # pyright: ignore[reportUntypedFunctionDecorator]
async def engine(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[EmbeddedEngine]:
    """One dev server on a SQLite file for the whole run."""
    async with EmbeddedEngine(state_dir=tmp_path_factory.mktemp("engine")) as engine:
        yield engine


@pytest_asyncio.fixture(scope="session")  # pyright: ignore[reportUntypedFunctionDecorator]
async def client(engine: EmbeddedEngine) -> Client:
    """A client of the session's dev server (pydantic converter)."""
    return await engine.client()


@pytest.fixture
def flow_type() -> str:
    """A fresh flow type (and task queue) per test, so tests never share workers."""
    return f"Flow{uuid.uuid4().hex[:10]}"

"""Fixtures for CLI tests: a ledger flow served in-process or by `dex-agents worker`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.cli_harness import Served, Term, agent_env, flow_config, spawn
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer setting may point a command elsewhere."""
    for name in list(os.environ):
        if name.startswith("DEX_AGENTS_"):
            monkeypatch.delenv(name)


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def served(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[Served]:
    """A ledger flow with a worker in this process, on the run's dev server."""
    config = flow_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store_path = tmp_path / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(store_path)
    async with create_worker(client, [flow], store=store):
        yield Served(
            flow_type=flow_type,
            sessions=SessionClient(client, flow, store),
            store=store,
            ledger=Ledger(config.ledger_path),
            base=tmp_path,
            target=["--state-dir", str(engine.state_dir), "--store", str(store_path)],
        )
    await store.close()


@pytest.fixture
def worker_process(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> Iterator[Term]:
    """`dex-agents worker` serving the ledger flow on the run's dev server."""
    child = spawn(
        [
            "worker",
            "--agent",
            "agents:flow",
            "--state-dir",
            str(engine.state_dir),
            "--store",
            str(tmp_path / "runtime.sqlite"),
        ],
        agent_env(tmp_path, flow_type),
        tmp_path,
    )
    child.expect("ready")
    yield child
    child.stop()

"""Fixtures for session tests: a ledger flow served by an in-process worker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from support.session_harness import Harness, make_config
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def harness(
    client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[Harness]:
    """A ledger flow with an in-process worker and its own store."""
    config = make_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    async with create_worker(client, [flow], store=store):
        yield Harness(
            flow=flow,
            sessions=SessionClient(client, flow, store),
            store=store,
            ledger=Ledger(config.ledger_path),
            gate_dir=Path(config.gate_dir),
            config=config,
        )
    await store.close()

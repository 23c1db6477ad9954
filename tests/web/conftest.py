"""Fixtures of the web suite: the ledger flow's worker and the app on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from temporalio.client import Client
from web_rig import WebRig, ledger_config, role_tokens

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing import Ledger, ledger_flow
from dex_agents.web import WebOptions, create_app, serving


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def rig(client: Client, tmp_path: Path, flow_type: str) -> AsyncIterator[WebRig]:
    """The ledger flow with an in-process worker, served by the app with role tokens."""
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(
        client,
        [flow],
        store,
        tokens=role_tokens(),
        options=WebOptions(worker_timeout=5.0, wait_timeout=5.0),
    )
    async with (
        create_worker(client, [flow], store=store),
        serving(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
    ):
        yield WebRig(
            url=server.url,
            http=http,
            flow=flow,
            sessions=SessionClient(client, flow, store),
            store=store,
            ledger=Ledger(config.ledger_path),
            gate_dir=Path(config.gate_dir),
        )
    await store.close()

"""Fixtures of the web suite: the ledger flow's worker and the app on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from temporalio.client import Client
from support.web_rig import WebRig, ledger_config, serve_ledger

from dex_agents.web import WebOptions


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def rig(client: Client, tmp_path: Path, flow_type: str) -> AsyncIterator[WebRig]:
    """The ledger flow with an in-process worker, served by the app with role tokens."""
    config = ledger_config(tmp_path, flow_type)
    options = WebOptions(worker_timeout=5.0, wait_timeout=5.0)
    async with serve_ledger(client, config, options=options) as served:
        yield served

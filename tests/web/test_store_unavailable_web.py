"""A runtime store that cannot serve a request now is a 503 `store_unavailable`, not a bug's 500.

Against the real app and server, on a SQLite file another connection holds
locked past the store's `busy_timeout`, as a long writer does; once it lets
go, the same request is answered.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpx
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.session_harness import ledger_config
from support.web_rig import ROLE_TOKENS, role_tokens

READER = {"Authorization": f"Bearer {ROLE_TOKENS['read']}"}


async def test_a_locked_store_is_a_503_that_says_try_again(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    path = tmp_path / "runtime.sqlite"
    sid = "locked-store"
    written = SQLiteRuntimeStore(path)
    async with create_worker(client, [flow], store=written):
        sessions = SessionClient(client, flow, written)
        await sessions.start(sid, initial_message="say hello")
        await sessions.wait_for_idle(sid)
        async with asyncio.timeout(30):  # its turn is published after it idles
            while not await written.read_turns(sid, limit=1):
                await asyncio.sleep(0.05)
    await written.close()
    # The app's own store; nothing else has the file open, so another
    # process can hold it exclusively, as a long writer does.
    store = SQLiteRuntimeStore(path, busy_timeout=0.2)
    app = create_app(client, [flow], store, tokens=role_tokens())
    async with (
        serving(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
    ):
        holder = sqlite3.connect(path, isolation_level=None, timeout=10)
        try:
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
            holder.execute("BEGIN EXCLUSIVE")
            locked = await http.get(f"/api/sessions/{sid}/history", headers=READER)
            holder.execute("COMMIT")
        finally:
            holder.close()
        served = await http.get(f"/api/sessions/{sid}/history", headers=READER)
    await store.close()

    assert locked.status_code == 503, locked.text
    error = locked.json()["error"]
    assert error["code"] == "store_unavailable"
    assert "database is locked" in error["message"]
    assert served.status_code == 200, served.text
    assert served.json()["turns"], served.text

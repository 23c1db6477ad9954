"""Open event streams are capped per caller and in all: past a cap, 429 `too_many_streams`.

Each stream holds a connection for as long as its client keeps it, so one
token must not be able to hold every connection the server has. Against the
real app, server and worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from dex_agents import InvalidArgumentError
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.session_harness import ledger_config
from support.web_rig import ROLE_TOKENS, role_tokens


def as_(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ROLE_TOKENS[role]}"}  # pyright: ignore[reportArgumentType]


async def test_streams_past_a_cap_are_429_and_a_closed_one_frees_its_place(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(
        client,
        [flow],
        store,
        tokens=role_tokens(),
        max_streams=3,
        max_streams_per_caller=2,
    )
    sid = "capped-streams"
    async with (
        create_worker(client, [flow], store=store),
        serving(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
        contextlib.AsyncExitStack() as held,
    ):
        sessions = SessionClient(client, flow, store)
        await sessions.start(sid, initial_message="say hello")
        await sessions.wait_for_idle(sid)
        path = f"/api/sessions/{sid}/events"

        async def opened(role: str) -> httpx.Response:
            return await held.enter_async_context(
                http.stream("GET", path, headers=as_(role))
            )

        first = await opened("read")
        await opened("read")
        assert first.status_code == 200
        third = await http.get(path, headers=as_("read"))
        assert third.status_code == 429, third.text
        error = third.json()["error"]
        assert error["code"] == "too_many_streams"
        assert "max_streams_per_caller=2" in error["message"]
        assert "'reader'" in error["message"]
        # Another caller still gets one, up to the app's total.
        other = await opened("chat")
        assert other.status_code == 200
        full = await http.get(f"{path}/ag-ui", headers=as_("admin"))
        assert full.status_code == 429, full.text
        assert "max_streams=3" in full.json()["error"]["message"]

        # The reader closes one: its place comes back (the server sees the close).
        await first.aclose()
        async with asyncio.timeout(10):
            while True:
                again = await http.get(
                    path, headers=as_("read"), params={"until": "idle"}
                )
                if again.status_code == 200:
                    break
                assert again.status_code == 429
                await asyncio.sleep(0.05)
    await store.close()


@pytest.mark.parametrize("name", ["max_streams", "max_streams_per_caller"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
async def test_a_stream_cap_must_be_a_positive_whole_number(
    client: Client, tmp_path: Path, name: str, value: object
) -> None:
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    try:
        with pytest.raises(InvalidArgumentError) as refused:
            create_app(client, [], store, tokens=role_tokens(), **{name: value})  # pyright: ignore[reportArgumentType]
        assert f"`{name}=` must be a positive whole number" in str(refused.value)
    finally:
        await store.close()

"""Figure 8: the web app, measured through its own HTTP server on 127.0.0.1.

8a: 200 clients follow one session's events as Server-Sent Events while it
streams; for each text delta, the time from the runner emitting it to the
200th client reading it (the runner and the clients share this process's
monotonic clock, as in figure 6). 8b: listing 1,000 pending approvals through
`GET /api/approvals`, page by page, from the runtime store's projections.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow

from . import _stats
from ._deltas import STAMP, StampingRunner
from ._report import Row
from ._rig import BenchError, Rig

CLIENTS = 200
APPROVALS = 1000


async def web_figures(rig: Rig) -> tuple[list[Row], Any]:
    """Both web figures, each on its own app and store."""
    try:
        from dex_agents.web import create_app
        from dex_agents.web._server import serving
    except ImportError as err:
        raise BenchError(f"figure 8 needs the `web` extra: {err}") from err
    fan = await _fan_out(rig, create_app, serving)
    listing = await _approvals(rig, create_app, serving)
    return [fan[0], listing[0]], {"fan_out_ms": fan[1], "listing_ms": listing[1]}


async def _fan_out(rig: Rig, create_app: Any, serving: Any) -> tuple[Row, list[float]]:
    clients = 20 if rig.quick else CLIENTS
    deltas, gap = (10, 0.05) if rig.quick else (40, 0.05)
    flow = create_agent_session_flow(
        StampingRunner(deltas=deltas, gap=gap), "BenchWebFanOut"
    )
    store = SQLiteRuntimeStore(rig.tmp / "web-fan-runtime.sqlite")
    sessions = SessionClient(rig.client, flow, store)
    session_id = "web-fan-out"
    arrivals: dict[float, list[float]] = {}
    connected = 0
    all_connected = asyncio.Event()

    async def follow(http: httpx.AsyncClient) -> None:
        nonlocal connected
        seen = 0
        async with http.stream(
            "GET", f"/api/sessions/{session_id}/events", params={"until": "idle"}
        ) as response:
            if response.status_code != 200:
                raise BenchError(f"events answered {response.status_code}")
            connected += 1
            if connected == clients:
                all_connected.set()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                item = json.loads(line[6:])
                stamp = item.get("data", {}).get(STAMP)
                if item.get("type") == "text_delta" and isinstance(stamp, float):
                    arrivals.setdefault(stamp, []).append(time.monotonic())
                    seen += 1
                    if seen == deltas:
                        return

    try:
        async with create_worker(rig.client, [flow], store=store):
            await sessions.start(session_id)
            app = create_app(rig.client, [flow], store, allow_anonymous_loopback=True)
            async with serving(app) as web:
                limits = httpx.Limits(max_connections=clients + 10)
                async with httpx.AsyncClient(
                    base_url=web.url, limits=limits, timeout=60
                ) as http:
                    followers = [
                        asyncio.create_task(follow(http)) for _ in range(clients)
                    ]
                    async with asyncio.timeout(60):
                        await all_connected.wait()
                    await sessions.send_and_wait(session_id, "stream to the web")
                    async with asyncio.timeout(60):
                        await asyncio.gather(*followers)
    finally:
        await store.close()
    to_last = [
        (max(times) - stamp) * 1000
        for stamp, times in arrivals.items()
        if len(times) == clients
    ]
    if len(to_last) != deltas:
        raise BenchError(f"only {len(to_last)} of {deltas} deltas reached every client")
    rig.progress.log(f"8 web fan-out: {clients} clients, {deltas} deltas")
    row = Row(
        key="8a",
        figure=f"text delta emitted → read by the {clients}th of {clients} SSE clients",
        unit="ms",
        median=_stats.median(to_last),
        p95=_stats.p95(to_last),
        samples=len(to_last),
        note=(
            f"one session, {deltas} deltas {gap * 1000:.0f} ms apart; the clients "
            "(httpx), the app (uvicorn) and the worker share this process; the app "
            "polls the store once per session for all its followers"
        ),
    )
    return row, to_last


async def _approvals(
    rig: Rig, create_app: Any, serving: Any
) -> tuple[Row, list[float]]:
    """1,000 projections of sessions waiting for approval, listed through the API."""
    count = 100 if rig.quick else APPROVALS
    runs = 3 if rig.quick else 10
    config = LedgerFlowConfig(
        flow_type="BenchWebApprovals",
        ledger_path=str(rig.tmp / "web-ledger.jsonl"),
        gate_dir=str(rig.directory("web-gates")),
    )
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(rig.tmp / "web-approvals-runtime.sqlite")
    sessions = SessionClient(rig.client, flow, store)
    times: list[float] = []
    try:
        async with create_worker(rig.client, [flow], store=store):
            # One real session waiting for approval; its projection, copied for the rest.
            await sessions.start(
                "web-approval-0", initial_message='call create_refund {"orderId": "7"}'
            )
            waiting = await sessions.wait_for_idle("web-approval-0")
            if waiting.status != "waiting_for_approval":
                raise BenchError(f"the session did not wait: {waiting.status}")
            projection = await store.get_snapshot("web-approval-0")
            if projection is None:
                raise BenchError("the waiting session has no projection")
        for n in range(1, count):
            sid = f"web-approval-{n}"
            await store.put_snapshot(sid, {**projection, "session_id": sid})
        app = create_app(rig.client, [flow], store, allow_anonymous_loopback=True)
        async with serving(app) as web, httpx.AsyncClient(base_url=web.url) as http:
            for _ in range(runs):
                started = time.monotonic()
                listed = 0
                before: str | None = None
                while True:
                    params: dict[str, str | int] = {"limit": 500}
                    if before is not None:
                        params["before"] = before
                    page = (await http.get("/api/approvals", params=params)).json()
                    listed += len(page["approvals"])
                    before = page.get("next_before")
                    if before is None:
                        break
                times.append((time.monotonic() - started) * 1000)
                if listed != count:
                    raise BenchError(f"listed {listed} approvals, not {count}")
    finally:
        await store.close()
    row = Row(
        key="8b",
        figure=f"listing {count:,} pending approvals (`GET /api/approvals`, pages of 500)",
        unit="ms",
        median=_stats.median(times),
        p95=_stats.p95(times),
        samples=len(times),
        note="the sessions' projections in the SQLite runtime store; each page one query",
    )
    return row, times

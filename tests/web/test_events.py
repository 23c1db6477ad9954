"""Events over SSE: resumable with Last-Event-ID, once each, superseded attempts marked, AG-UI."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter
from temporalio.client import Client

from dex_agents.session._state import SessionInput
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing import WorkerProcess
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.testing._worker_process import WorkerProcessConfig
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.session_harness import ledger_config
from support.web_rig import Sse, SseReader, WebRig, bearer, role_tokens

_AGUI: TypeAdapter[Any] = TypeAdapter(Event)


@contextlib.asynccontextmanager
async def follow(
    http: httpx.AsyncClient, path: str, last_event_id: str | None = None
) -> AsyncIterator[SseReader]:
    headers = bearer("read")
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with http.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield SseReader(response.aiter_lines())


def is_type(*types: str) -> Any:
    return lambda sse: sse.json().get("type") in types


def visible_text(items: list[dict[str, Any]]) -> str:
    """What a client shows: text per (step, attempt), dropping superseded attempts."""
    text: dict[tuple[str, int], str] = {}
    for item in items:
        if item["type"] == "attempt_superseded":
            for key in [k for k in text if k[0] == item["step_execution_id"]]:
                if key[1] < item["attempt"]:
                    del text[key]
        elif item["type"] == "text_delta" and not item["superseded"]:
            key = (item["step_execution_id"], item["attempt"])
            text[key] = text.get(key, "") + item["data"]["text"]
    return "".join(text.values())


async def test_a_client_that_reconnects_mid_turn_gets_every_event_once_in_order(
    rig: WebRig,
) -> None:
    sid = rig.session_id("sse-resume")
    await rig.sessions.start(sid, initial_message="stream 6 ;; pause midway")
    path = f"/api/sessions/{sid}/events"
    chain: list[Sse] = []
    # A second follower stays connected throughout: the resumed one catches up
    # from the shared feed's window, the first connection from the store.
    async with follow(rig.http, path) as keeper:
        async with follow(rig.http, path) as first:
            chain += await first.until(is_type("text_delta"))
            chain += [await first.next()]  # one more delta, then drop the connection
        await rig.reached("midway")
        async with follow(rig.http, path, last_event_id=chain[-1].id) as second:
            chain += await second.until(lambda s: s.json()["data"].get("text") == "t3 ")
        rig.open_gate("midway")  # the rest of the turn streams while nobody listens
        await rig.sessions.wait_for_idle(sid)
        async with follow(rig.http, path, last_event_id=chain[-1].id) as third:
            chain += await third.until(is_type("turn_completed"))
        kept = await keeper.until(is_type("turn_completed"))

    logged = await rig.store.read_events(sid)
    expected = [e.cursor for e in logged]
    assert [int(s.id or 0) for s in chain] == expected
    assert [int(s.id or 0) for s in kept] == expected
    assert [s.json()["cursor"] for s in chain] == expected
    deltas = [
        s.json()["data"]["text"] for s in chain if s.json()["type"] == "text_delta"
    ]
    assert deltas == [f"t{i} " for i in range(6)] + ["streamed 6"]
    assert chain[0].json()["type"] == "turn_started"


async def test_after_and_until_idle(rig: WebRig) -> None:
    sid = rig.session_id("sse-after")
    await rig.sessions.start(sid, initial_message="say one")
    await rig.sessions.wait_for_idle(sid)
    await rig.sessions.send_user_message(sid, "say two")
    await rig.sessions.wait_for_idle(sid)
    logged = await rig.store.read_events(sid)
    (first_end,) = [e.cursor for e in logged if e.type == "turn_completed"][:1]
    async with follow(
        rig.http, f"/api/sessions/{sid}/events?after={first_end}&until=idle"
    ) as s:
        items = await s.until(is_type("turn_completed"))
        # `until=idle` ended the stream after the turn's end.
        try:
            await s.next(timeout=5)
            raise AssertionError("the stream went on after until=idle")
        except EOFError:
            pass
    assert {i.json()["turn_id"] for i in items} == {"turn-2"}


async def test_the_superseded_attempt_of_a_failed_segment_is_marked(
    rig: WebRig,
) -> None:
    sid = rig.session_id("sse-fail-once")
    await rig.sessions.start(sid, initial_message="fail_once")
    async with follow(rig.http, f"/api/sessions/{sid}/events?until=idle") as s:
        items = [
            x.json() for x in await s.until(is_type("turn_completed", "turn_failed"))
        ]
    (marker,) = [i for i in items if i["type"] == "attempt_superseded"]
    assert marker == {
        "type": "attempt_superseded",
        "turn_id": "turn-1",
        "step_execution_id": "turn-1/run_model/1",
        "attempt": 2,
    }
    assert visible_text(items) == "unknown script: fail_once"


async def test_a_worker_killed_mid_turn_leaves_its_attempt_marked_superseded(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type, heartbeat_seconds=1.0)
    store_path = tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(store_path)
    flow = ledger_flow(config)
    sessions = SessionClient(client, flow, store)
    gates = Path(config.gate_dir)
    worker = WorkerProcess(
        WorkerProcessConfig(
            address=engine.address,
            namespace=engine.namespace,
            store_path=str(store_path),
            flow=config,
        ),
        tmp_path,
    )
    app = create_app(client, [flow], store, tokens=role_tokens())
    with worker:
        async with (
            serving(app) as server,
            httpx.AsyncClient(base_url=server.url, timeout=60) as http,
        ):
            sid = "sse-killed-worker-4c1d"
            await sessions.start(sid, initial_message="stream 6 ;; pause midway")
            path = f"/api/sessions/{sid}/events"
            async with follow(http, path) as stream:
                before = await stream.until(
                    lambda s: s.json()["data"].get("text") == "t3 "
                )
                async with asyncio.timeout(30):
                    while not (gates / "midway.reached").exists():
                        await asyncio.sleep(0.02)
                worker.kill()  # SIGKILL in the middle of the segment
                (gates / "midway").write_text("")
                worker.start()
                after = await stream.until(is_type("turn_completed"), timeout=60)
            # A reconnect from the start sees the same marks (they follow from the log).
            async with follow(http, f"{path}?until=idle") as replay:
                again = await replay.until(is_type("turn_completed"), timeout=30)
    await store.close()

    items = [s.json() for s in before + after]
    first_attempt = [
        i for i in items if i.get("attempt") == 1 and i["type"] == "text_delta"
    ]
    assert [i["data"]["text"] for i in first_attempt] == ["t0 ", "t1 ", "t2 ", "t3 "]
    markers = [i for i in items if i["type"] == "attempt_superseded"]
    assert markers == [
        {
            "type": "attempt_superseded",
            "turn_id": "turn-1",
            "step_execution_id": "turn-1/run_model/1",
            "attempt": 2,
        }
    ]
    # The marker comes before anything of attempt 2.
    marker_at = items.index(markers[0])
    assert all(i.get("attempt") != 2 for i in items[:marker_at])
    assert visible_text(items) == "t0 t1 t2 t3 t4 t5 streamed 6"
    assert visible_text([s.json() for s in again]) == "t0 t1 t2 t3 t4 t5 streamed 6"


async def test_the_same_stream_in_ag_ui_format(rig: WebRig) -> None:
    sid = rig.session_id("sse-agui")
    await rig.sessions.start(
        sid,
        initial_message='call lookup_order {"orderId": "7"} && call create_refund {"orderId": "7"}',
    )
    path = f"/api/sessions/{sid}/events/ag-ui"

    def finished(sse: Sse) -> bool:
        return sse.json()["type"] in ("RUN_FINISHED", "RUN_ERROR")

    async with follow(rig.http, path) as s:
        first = await s.until(finished)
    events = [
        _AGUI.validate_python(x.json()) for x in first
    ]  # every one is valid AG-UI
    kinds = [x.json()["type"] for x in first]
    assert kinds[0] == "RUN_STARTED"
    assert first[0].json()["threadId"] == sid and first[0].json()["runId"] == "turn-1"
    chunk = next(x.json() for x in first if x.json()["type"] == "TOOL_CALL_CHUNK")
    assert (chunk["toolCallName"], json.loads(chunk["delta"])) == (
        "lookup_order",
        {"orderId": "7"},
    )
    assert "TOOL_CALL_RESULT" in kinds
    pause = first[-1].json()
    assert pause["outcome"]["type"] == "interrupt"
    (interrupt,) = pause["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert pause["metadata"]["dex"]["cursor"] == int(first[-1].id or 0)
    assert len(events) == len(first)

    approved = await rig.http.post(
        f"/api/sessions/{sid}/approvals/{interrupt['id']}/approve",
        headers=bearer("approve"),
    )
    assert approved.status_code == 200
    async with follow(rig.http, path, last_event_id=first[-1].id) as s:
        rest = await s.until(finished)
    resumed = rest[0].json()
    assert resumed["type"] == "RUN_STARTED"
    assert resumed["metadata"]["resolution"]["resolved_by"] == "approver"
    assert rest[-1].json()["type"] == "RUN_FINISHED"
    assert rest[-1].json()["outcome"] == {"type": "success"}
    texts = [
        x.json()["delta"] for x in rest if x.json()["type"] == "TEXT_MESSAGE_CHUNK"
    ]
    assert texts == ["done: create_refund=refunded order 7"]
    ids = [int(x.id or 0) for x in first + rest]
    assert ids == sorted(set(ids))  # once each, in order


async def test_a_session_no_worker_has_taken_streams_its_events(rig: WebRig) -> None:
    """Opening a stream read the session through a Query: with no worker, 503.

    The Query waited its whole deadline (5 s) and, with nothing in the store
    yet, answered 503 `engine_unavailable`. The stream now checks that the
    session exists (the store, else Temporal's `describe`) and opens.
    """
    sid = rig.session_id("sse-no-worker")
    await rig.sessions.client.start_workflow(
        rig.flow.flow_type,
        SessionInput(),
        id=sid,
        task_queue=f"{rig.flow.task_queue}.nobody-polls",
    )
    async with rig.http.stream(
        "GET", f"/api/sessions/{sid}/events", headers=bearer("read")
    ) as response:
        assert response.status_code == 200, await response.aread()
    unknown = await rig.http.get(
        f"/api/sessions/{rig.session_id('none')}/events", headers=bearer("read")
    )
    assert unknown.status_code == 404, unknown.text

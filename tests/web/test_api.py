"""Every endpoint of the API against the real app, server and worker, and its errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EngineConfig, SessionClient, open_engine
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.web import create_app
from dex_agents.web._server import serving
from dex_agents.web._tokens import Role
from support.cli_harness import closed_port
from support.session_harness import ledger_config
from support.web_rig import WebRig, bearer, role_tokens, workerless_app

REFUND = 'call create_refund {"orderId": "7"}'
DESK = "https://desk.example.com"
"""The origin of a browser front end on another site (the docs' CORS example)."""


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["message"]
    return response.status_code, body["error"]["code"]


async def test_start_list_snapshot_history(rig: WebRig) -> None:
    sid = rig.session_id("api-start")
    started = await rig.http.post(
        "/api/sessions",
        json={"session_id": sid, "message": "say hello"},
        headers=bearer("chat"),
    )
    assert started.status_code == 201
    assert started.json() == {"session_id": sid, "queued": True}
    await rig.sessions.wait_for_idle(sid)

    view = await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))
    assert view.status_code == 200
    snapshot = view.json()["snapshot"]
    assert snapshot["status"] == "idle"
    assert [t["final_text"] for t in snapshot["turns"]] == ["said: hello"]

    sent = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "say again"},
        headers=bearer("chat"),
    )
    assert (sent.status_code, sent.json()) == (202, {"queued": True})
    waited = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "say third", "wait": True},
        headers=bearer("chat"),
    )
    assert waited.status_code == 200
    turns = waited.json()["snapshot"]["turns"]
    assert [t["final_text"] for t in turns][-1] == "said: third"

    history = await rig.http.get(
        f"/api/sessions/{sid}/history?limit=2", headers=bearer("read")
    )
    page = history.json()
    assert [t["turn_id"] for t in page["turns"]] == ["turn-3", "turn-2"]
    assert page["next_before"] == 2
    older = await rig.http.get(
        f"/api/sessions/{sid}/history?limit=2&before=2", headers=bearer("read")
    )
    assert [t["turn_id"] for t in older.json()["turns"]] == ["turn-1"]
    assert older.json()["next_before"] is None

    listed = await rig.http.get("/api/sessions?status=idle", headers=bearer("read"))
    summary = next(s for s in listed.json()["sessions"] if s["session_id"] == sid)
    assert summary["flow_type"] == rig.flow.flow_type
    assert summary["turn_count"] == 3
    running = await rig.http.get("/api/sessions?status=running", headers=bearer("read"))
    assert sid not in [s["session_id"] for s in running.json()["sessions"]]


async def test_sessions_list_pages(rig: WebRig) -> None:
    ids = [rig.session_id("api-page") for _ in range(3)]
    for sid in ids:
        await rig.sessions.start(sid, initial_message="say hi")
        await rig.sessions.wait_for_idle(sid)
    seen: list[str] = []
    before: str | None = None
    while True:
        query = "limit=2" + (f"&before={before}" if before else "")
        page = (
            await rig.http.get(f"/api/sessions?{query}", headers=bearer("read"))
        ).json()
        seen += [s["session_id"] for s in page["sessions"]]
        before = page["next_before"]
        if before is None:
            break
    assert [s for s in seen if s in ids] == ids[::-1]  # newest first, each once


async def test_images_by_reference_reach_the_session(rig: WebRig) -> None:
    # The scripted runner has no media store: images are 422 `images_not_supported`
    # (tests/web/test_images_and_bodies.py has the rest).
    sid = rig.session_id("api-images")
    await rig.sessions.start(sid, initial_message="say first")
    await rig.sessions.wait_for_idle(sid)
    image = {"media_type": "image/png", "key": "a.png", "sha256": "0" * 64, "size": 3}
    sent = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "look", "images": [image]},
        headers=bearer("chat"),
    )
    assert error_of(sent) == (422, "images_not_supported")
    bad = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "look", "images": [{**image, "sha256": "nothex"}]},
        headers=bearer("chat"),
    )
    assert error_of(bad) == (422, "invalid_request")


async def test_approvals_list_approve_and_the_recorded_approver(rig: WebRig) -> None:
    sid = rig.session_id("api-approve")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    await rig.listed_approval(sid)

    page = (await rig.http.get("/api/approvals", headers=bearer("read"))).json()
    (approval,) = [a for a in page["approvals"] if a["session_id"] == sid]
    assert approval["interrupt_id"] == interrupt_id
    assert approval["tool_name"] == "create_refund"
    assert approval["effect"] == "non_idempotent_write"
    assert approval["arguments"] == {"orderId": "7"}
    assert approval["reason"] == "create_refund is non_idempotent_write"
    assert approval["deadline"] is None
    assert approval["age_seconds"] >= 0

    snapshot = await rig.approved_over_api(sid, interrupt_id)
    assert snapshot.turns[-1].final_text == "done: create_refund=refunded order 7"
    assert rig.ledger.count("create_refund") == 1

    # Who approved: on the call's record in the snapshot (recorded by the session
    # with the resolution), in the event, and a repeat is refused naming them.
    view = (await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))).json()
    (call,) = view["snapshot"]["turns"][-1]["tool_calls"]
    assert (call["tool_call_id"], call["status"], call["resolved_by"]) == (
        "call_turn-1_0",
        "finished",
        "approver",
    )
    assert snapshot.turns[-1].tool_calls[0].resolved_by == "approver"
    async with rig.http.stream(
        "GET", f"/api/sessions/{sid}/events?until=idle", headers=bearer("read")
    ) as stream:
        events = [
            json.loads(line[6:])
            async for line in stream.aiter_lines()
            if line.startswith("data: ")
        ]
    # until=idle stops at the first idle point: the approval request; read on from it.
    assert events[-1]["type"] == "interrupt_created"
    async with rig.http.stream(
        "GET",
        f"/api/sessions/{sid}/events?until=idle&after={events[-1]['cursor']}",
        headers=bearer("read"),
    ) as stream:
        rest = [
            json.loads(line[6:])
            async for line in stream.aiter_lines()
            if line.startswith("data: ")
        ]
    (resolved,) = [e for e in rest if e["type"] == "interrupt_resolved"]
    assert resolved["data"]["resolved_by"] == "approver"
    assert rest[-1]["type"] == "turn_completed"

    again = await rig.http.post(
        f"/api/sessions/{sid}/approvals/{interrupt_id}/reject",
        json={"message": "no"},
        headers=bearer("approve"),
    )
    assert error_of(again) == (409, "already_resolved")
    assert "'approver'" in again.json()["error"]["message"]


async def test_reject_with_a_message_reaches_the_model(rig: WebRig) -> None:
    sid = rig.session_id("api-reject")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    rejected = await rig.http.post(
        f"/api/sessions/{sid}/approvals/{interrupt_id}/reject",
        json={"message": "order 7 was refunded last week"},
        headers=bearer("admin"),
    )
    assert rejected.status_code == 200
    assert rejected.json()["by"] == "root"
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].final_text == (
        "done: create_refund=The user rejected this call: order 7 was refunded last week"
    )
    assert rig.ledger.count("create_refund") == 0
    view = (await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))).json()
    (call,) = view["snapshot"]["turns"][-1]["tool_calls"]
    assert (call["resolved_by"], call["status"], call["rejection_message"]) == (
        "root",
        "rejected",
        "order 7 was refunded last week",
    )


async def test_end_and_what_an_ended_session_refuses(rig: WebRig) -> None:
    sid = rig.session_id("api-end")
    await rig.sessions.start(sid, initial_message=REFUND)
    await rig.pending(sid)
    busy = await rig.http.post(
        f"/api/sessions/{sid}/end", json={}, headers=bearer("admin")
    )
    assert error_of(busy) == (409, "session_busy")
    ended = await rig.http.post(
        f"/api/sessions/{sid}/end",
        json={"force": True, "reason": "closing the desk"},
        headers=bearer("admin"),
    )
    assert (ended.status_code, ended.json()) == (200, {"ended": True})
    again = await rig.http.post(
        f"/api/sessions/{sid}/end", json={}, headers=bearer("admin")
    )
    assert (again.status_code, again.json()) == (200, {"ended": False})
    sent = await rig.http.post(
        f"/api/sessions/{sid}/messages", json={"text": "say hi"}, headers=bearer("chat")
    )
    assert error_of(sent) == (409, "session_ended")
    view = (await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))).json()
    assert view["snapshot"]["status"] == "ended"


async def test_end_without_the_core_call_is_501(
    rig: WebRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An older core has no `SessionClient.end`: the API says what is missing.
    monkeypatch.delattr(SessionClient, "end")
    response = await rig.http.post(
        f"/api/sessions/{rig.session_id()}/end", json={}, headers=bearer("admin")
    )
    assert error_of(response) == (501, "not_implemented")
    assert "SessionClient.end" in response.json()["error"]["message"]


async def test_error_codes(rig: WebRig) -> None:
    missing = rig.session_id("api-missing")
    cases: list[tuple[httpx.Response, tuple[int, str]]] = [
        (await rig.http.get("/api/sessions"), (401, "unauthorized")),
        (
            await rig.http.get(
                "/api/sessions", headers={"Authorization": "Bearer nope"}
            ),
            (401, "unauthorized"),
        ),
        (
            await rig.http.get(
                "/api/sessions", headers={"Authorization": "Basic eDp5"}
            ),
            (401, "unauthorized"),
        ),
        (
            await rig.http.post("/api/sessions", json={}, headers=bearer("read")),
            (403, "forbidden"),
        ),
        (
            await rig.http.get("/api/nothing", headers=bearer("read")),
            (404, "not_found"),
        ),
        (
            await rig.http.get(f"/api/sessions/{missing}", headers=bearer("read")),
            (404, "session_not_found"),
        ),
        (
            await rig.http.get(
                f"/api/sessions/{missing}/history", headers=bearer("read")
            ),
            (404, "session_not_found"),
        ),
        (
            await rig.http.post(
                f"/api/sessions/{missing}/messages",
                json={"text": "say hi"},
                headers=bearer("chat"),
            ),
            (404, "session_not_found"),
        ),
        (
            await rig.http.post(
                f"/api/sessions/{missing}/end", json={}, headers=bearer("admin")
            ),
            (404, "session_not_found"),
        ),
        (
            await rig.http.get(
                f"/api/sessions/{missing}/events", headers=bearer("read")
            ),
            (404, "session_not_found"),
        ),
        (
            await rig.http.delete("/api/sessions", headers=bearer("admin")),
            (405, "method_not_allowed"),
        ),
        (
            await rig.http.get("/api/sessions?limit=0", headers=bearer("read")),
            (422, "invalid_request"),
        ),
        (
            await rig.http.post(
                "/api/sessions", json={"session_id": ""}, headers=bearer("chat")
            ),
            (422, "invalid_request"),
        ),
        (
            await rig.http.post(
                "/api/sessions", json={"flow": "NoSuchFlow"}, headers=bearer("chat")
            ),
            (400, "invalid_request"),
        ),
        (
            await rig.http.get(
                "/api/sessions?before=no-such-session", headers=bearer("read")
            ),
            (400, "invalid_request"),
        ),
    ]
    for response, expected in cases:
        assert error_of(response) == expected, (response.request.url, response.text)
    assert cases[0][0].headers["www-authenticate"] == "Bearer"

    sid = rig.session_id("api-codes")
    await rig.sessions.start(sid, initial_message=REFUND)
    await rig.pending(sid)
    unknown = await rig.http.post(
        f"/api/sessions/{sid}/approvals/no-such-interrupt/approve",
        headers=bearer("approve"),
    )
    assert error_of(unknown) == (404, "interrupt_not_found")
    # It points a web client at the API's own list of pending interrupts.
    said = unknown.json()["error"]["message"]
    assert (
        f"has no interrupt 'no-such-interrupt'; read `pending_interrupts` from `GET /api/sessions/{sid}`"
        in said
    )
    assert "`GET /api/approvals`" in said and "SessionClient" not in said
    resume = await rig.http.get(
        f"/api/sessions/{sid}/events",
        headers={**bearer("read"), "Last-Event-ID": "abc"},
    )
    assert error_of(resume) == (400, "invalid_request")
    too_long = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "x" * (32 * 1024 * 1024 + 1)},
        headers=bearer("chat"),
    )
    assert error_of(too_long) == (422, "invalid_request")


async def test_a_turn_over_the_wait_limit_is_504(rig: WebRig) -> None:
    sid = rig.session_id("api-wait")
    await rig.sessions.start(sid, initial_message="say first")
    await rig.sessions.wait_for_idle(sid)
    response = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "say slow ;; pause slow", "wait": True},
        headers=bearer("chat"),
    )
    assert error_of(response) == (504, "timeout")
    rig.open_gate("slow")
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].final_text == "said: slow"


async def test_no_worker_is_503(client: Client, tmp_path: Path, flow_type: str) -> None:
    # A flow nobody serves: the start is admitted but no worker takes it.
    sid = "api-no-worker-7f3a"
    async with workerless_app(client, tmp_path, flow_type, sid) as http:
        started = await http.post(
            "/api/sessions",
            json={"session_id": sid, "message": "say hi"},
            headers=bearer("chat"),
        )
        assert error_of(started) == (503, "no_worker")
        assert (
            "read the session before sending it again"
            in started.json()["error"]["message"]
        )
        view = await http.get(f"/api/sessions/{sid}", headers=bearer("read"))
        assert error_of(view) == (503, "engine_unavailable")
        assert "is a worker running" in view.json()["error"]["message"]
        ended = await http.post(
            f"/api/sessions/{sid}/end", json={"force": True}, headers=bearer("admin")
        )
        assert error_of(ended) == (503, "no_worker")


async def _unreachable_engine() -> Client:
    """docs/web.md's client function, for a Temporal address where nothing listens."""
    config = EngineConfig(address=f"127.0.0.1:{closed_port()}")
    engine = await open_engine(config).start()
    return await engine.client()


async def _failing_client_function() -> Client:
    raise RuntimeError("the vault holding the Temporal API key is sealed")


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (_unreachable_engine, "cannot connect to the Temporal cluster"),
        (_failing_client_function, "raised RuntimeError"),
    ],
)
async def test_an_engine_out_of_reach_is_503_that_a_front_end_can_read(
    tmp_path: Path, flow_type: str, source: object, said: str
) -> None:
    # The mount of docs/web.md, with CORS on: every call that needs Temporal
    # says it cannot be reached (not "a bug"), with the headers a front end on
    # the CORS origin needs to read that.
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    service = FastAPI()
    service.mount(
        "/agents",
        create_app(
            source,  # pyright: ignore[reportArgumentType]
            [flow],
            store,
            tokens=role_tokens(),
            cors_origins=[DESK],
        ),
    )
    async with (
        serving(service) as server,
        httpx.AsyncClient(base_url=server.url, timeout=60) as http,
    ):
        calls: list[tuple[str, str, Role]] = [
            ("GET", "/agents/api/sessions/s1", "read"),
            ("GET", "/agents/api/sessions/s1/events", "read"),
            ("POST", "/agents/api/sessions", "chat"),
            ("POST", "/agents/api/sessions/s1/messages", "chat"),
        ]
        for method, path, role in calls:
            response = await http.request(
                method,
                path,
                json={"text": "hi"} if path.endswith("messages") else None,
                headers={**bearer(role), "Origin": DESK},
            )
            assert error_of(response) == (503, "engine_unavailable"), response.text
            message = response.json()["error"]["message"]
            assert "try again later" in message and said in message, message
            assert "vault" not in message  # a function's own error stays in the log
            assert response.headers.get("access-control-allow-origin") == DESK, path
    await store.close()


async def test_an_unexpected_error_is_a_500_that_a_front_end_can_read(
    tmp_path: Path,
) -> None:
    async def not_a_client() -> Client:
        # A client function with a bug: it hands back the address, not a client.
        return "127.0.0.1:7233"  # pyright: ignore[reportReturnType]

    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(not_a_client, [], store, tokens=role_tokens(), cors_origins=[DESK])
    async with (
        serving(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
    ):
        response = await http.get(
            "/api/sessions/s1", headers={**bearer("read"), "Origin": DESK}
        )
        assert error_of(response) == (500, "internal")
        assert "a bug" in response.json()["error"]["message"]
        assert response.headers.get("access-control-allow-origin") == DESK
    await store.close()


async def test_openapi_schema_is_served_and_names_every_endpoint(rig: WebRig) -> None:
    schema = (await rig.http.get("/api/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
    }
    operations = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert operations == {
        ("GET", "/api/whoami"),
        ("GET", "/api/sessions"),
        ("POST", "/api/sessions"),
        ("GET", "/api/sessions/{session_id}"),
        ("POST", "/api/sessions/{session_id}/messages"),
        ("GET", "/api/sessions/{session_id}/history"),
        ("POST", "/api/sessions/{session_id}/end"),
        ("POST", "/api/sessions/{session_id}/cancel"),
        ("GET", "/api/approvals"),
        ("POST", "/api/sessions/{session_id}/approvals/{interrupt_id}/approve"),
        ("POST", "/api/sessions/{session_id}/approvals/{interrupt_id}/reject"),
        ("GET", "/api/sessions/{session_id}/events"),
        ("GET", "/api/sessions/{session_id}/events/ag-ui"),
    }
    whoami = await rig.http.get("/api/whoami", headers=bearer("approve"))
    assert whoami.json() == {"name": "approver", "roles": ["approve", "read"]}


async def test_the_app_mounts_in_an_existing_fastapi_service(
    client: Client,
    tmp_path: Path,
    flow_type: str,
) -> None:
    from fastapi import FastAPI

    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    service = FastAPI()

    @service.get("/health")
    async def health() -> dict[str, str]:  # pyright: ignore[reportUnusedFunction]
        return {"ok": "yes"}

    service.mount("/agents", create_app(client, [], store, tokens=role_tokens()))
    transport = httpx.ASGITransport(app=service)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        assert (await http.get("/health")).json() == {"ok": "yes"}
        listed = await http.get("/agents/api/sessions", headers=bearer("read"))
        assert listed.status_code == 200
        assert (await http.get("/agents/api/sessions")).status_code == 401
        # A refusal names the login form where the browser finds it: under the mount.
        signed_out = await http.get("/agents/api/whoami")
        assert error_of(signed_out) == (401, "unauthorized")
        assert "sign in at `/agents/login`" in signed_out.json()["error"]["message"]
        unknown = await http.get(
            "/agents/api/whoami", headers={"Authorization": "Bearer not-a-token"}
        )
        assert error_of(unknown) == (401, "unauthorized")
        assert "sign in again at `/agents/login`" in unknown.json()["error"]["message"]
        login = await http.get("/agents/inbox")
        assert (login.status_code, login.headers["location"]) == (
            303,
            "/agents/login?next=/agents/inbox",
        )
        page = await http.get("/agents/login")
        assert 'href="/agents/static/dex.css"' in page.text
        assert (await http.get("/agents/static/dex.js")).status_code == 200
    await store.close()


async def test_cors_is_off_by_default_and_configurable(
    client: Client,
    tmp_path: Path,
) -> None:
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    preflight = {
        "Origin": "https://desk.example.com",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    for origins, allowed in (((), False), (("https://desk.example.com",), True)):
        app = create_app(client, [], store, tokens=role_tokens(), cors_origins=origins)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test"
        ) as http:
            response = await http.options("/api/sessions", headers=preflight)
            got = response.headers.get("access-control-allow-origin")
            assert (got == "https://desk.example.com") is allowed
            listed = await http.get(
                "/api/sessions",
                headers={**bearer("read"), "Origin": preflight["Origin"]},
            )
            assert ("access-control-allow-origin" in listed.headers) is allowed
    await store.close()


@pytest.mark.parametrize(
    ("origin", "meant"),
    [
        ("http://127.0.0.1:9100/", "'http://127.0.0.1:9100'"),
        ("127.0.0.1:9100", "'http://127.0.0.1:9100'"),
        ("https://Desk.example.com/app", "'https://desk.example.com'"),
        ("https://desk.example.com:443", "'https://desk.example.com'"),
        ("null", "cannot be trusted"),
    ],
)
async def test_a_mistyped_cors_origin_is_refused_naming_the_origin_meant(
    client: Client, tmp_path: Path, origin: str, meant: str
) -> None:
    from dex_agents import InvalidArgumentError

    # The browser's `Origin` is compared as text: such an entry never matches,
    # and every preflight would fail with a plain-text 400.
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    with pytest.raises(InvalidArgumentError) as err:
        create_app(client, [], store, tokens=role_tokens(), cors_origins=[origin])
    assert err.value.argument == "cors_origins"
    said = str(err.value)
    assert f"bad entry of `cors_origins=`: {origin!r}" in said
    assert "`scheme://host[:port]`" in said and meant in said
    for fine in (["*"], [DESK, "http://127.0.0.1:9100", "http://[::1]:8080"]):
        create_app(client, [], store, tokens=role_tokens(), cors_origins=fine)
    await store.close()


async def test_an_app_without_tokens_is_refused(client: Client, tmp_path: Path) -> None:
    from dex_agents import UserError
    from dex_agents.web._tokens import TokenSet

    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    with pytest.raises(UserError, match="no tokens"):
        create_app(client, [], store, tokens=TokenSet())
    await store.close()


async def test_an_app_whose_tokens_file_is_missing_is_refused_naming_it(
    client: Client, tmp_path: Path
) -> None:
    from dex_agents import UserError

    missing = tmp_path / "tokens.toml"
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    with pytest.raises(UserError, match="cannot read the token file") as err:
        create_app(client, [], store, tokens=missing)
    assert str(missing) in str(err.value)
    assert "create_app(tokens=...)" in str(err.value)
    await store.close()


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("worker_timeout", 0),
        ("wait_timeout", -1.0),
        ("wait_timeout", float("nan")),
        ("poll_interval", "fast"),
    ],
)
async def test_an_app_with_a_bad_timeout_is_refused_naming_it(
    client: Client, tmp_path: Path, argument: str, value: object
) -> None:
    from dex_agents import InvalidArgumentError

    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    with pytest.raises(InvalidArgumentError, match=f"`{argument}=` must be") as err:
        create_app(client, [], store, tokens=role_tokens(), **{argument: value})  # pyright: ignore[reportArgumentType]
    assert err.value.argument == argument
    await store.close()


async def test_requests_need_no_worker_to_be_refused_quickly(rig: WebRig) -> None:
    # A refused request answers at once, whatever the engine is doing.
    async with asyncio.timeout(5):
        response = await rig.http.post("/api/sessions", json={"message": "say hi"})
    assert error_of(response) == (401, "unauthorized")

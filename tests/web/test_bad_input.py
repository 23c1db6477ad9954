"""Requests a careless or hostile client sends: each a clear refusal, with nothing lost.

Against the real app, server and worker (the suite's `rig`).
"""

from __future__ import annotations

from pathlib import Path

import httpx
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.web_rig import WebRig, approve_path, bearer, csrf_of, role_tokens, sign_in

REFUND = 'call create_refund {"orderId": "7"}'


def refusal(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"]


async def test_a_misspelled_key_is_refused_and_the_call_still_waits(
    rig: WebRig,
) -> None:
    sid = rig.session_id("typo")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)

    # `edited_inputs` for `edited_input`: approving the model's input instead
    # of the edit would run a write nobody approved.
    typo = await rig.http.post(
        approve_path(sid, interrupt_id),
        json={"edited_inputs": {"orderId": "8"}},
        headers=bearer("approve"),
    )
    status, code, message = refusal(typo)
    assert (status, code) == (422, "invalid_request")
    assert "edited_inputs" in message and "not a field" in message
    rejected = await rig.http.post(
        approve_path(sid, interrupt_id).replace("/approve", "/reject"),
        json={"reason": "fraud"},
        headers=bearer("approve"),
    )
    assert refusal(rejected)[:2] == (422, "invalid_request")
    assert "reason" in refusal(rejected)[2]

    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]
    assert rig.ledger.entries("create_refund") == []
    # Spelled right, the edit is what runs.
    await rig.approved_over_api(sid, interrupt_id, {"edited_input": {"orderId": "8"}})
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == ["8"]


async def test_a_refused_start_starts_nothing(rig: WebRig) -> None:
    for body in (
        {"session_id": rig.session_id("typo-start"), "mesage": "say hi"},
        {"session_id": rig.session_id("blank-start"), "message": "  "},
    ):
        started = await rig.http.post(
            "/api/sessions", json=body, headers=bearer("chat")
        )
        status, code, message = refusal(started)
        assert (status, code) in {(422, "invalid_request"), (400, "invalid_request")}
        assert ("mesage" in message) if "mesage" in body else ("blank" in message)
        read = await rig.http.get(
            f"/api/sessions/{body['session_id']}", headers=bearer("read")
        )
        assert refusal(read)[:2] == (404, "session_not_found")


async def test_a_session_started_without_a_message_has_an_empty_history(
    rig: WebRig,
) -> None:
    sid = rig.session_id("idle-start")
    started = await rig.http.post(
        "/api/sessions", json={"session_id": sid}, headers=bearer("chat")
    )
    assert started.status_code == 201, started.text
    history = await rig.http.get(f"/api/sessions/{sid}/history", headers=bearer("read"))
    assert history.status_code == 200, history.text
    assert history.json() == {"turns": [], "next_before": None}


async def test_a_validation_error_quotes_the_value_it_refused(rig: WebRig) -> None:
    sid = rig.session_id("quoted")
    await rig.sessions.start(sid)
    refused = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "say hi", "wait": "yes please"},
        headers=bearer("chat"),
    )
    status, code, message = refusal(refused)
    assert (status, code) == (422, "invalid_request")
    assert "body.wait" in message and "'yes please'" in message


async def test_a_cursor_of_non_ascii_digits_is_a_400(rig: WebRig) -> None:
    sid = rig.session_id("cursor")
    await rig.sessions.start(sid)
    for path in (f"/api/sessions/{sid}/events", f"/api/sessions/{sid}/events/ag-ui"):
        resumed = await rig.http.get(
            f"{path}?until=idle",
            # Latin-1 on the wire, as HTTP headers are: the server reads `²`.
            headers=[
                *((k.encode(), v.encode()) for k, v in bearer("read").items()),
                (b"Last-Event-ID", "²".encode("latin-1")),
            ],
        )
        assert refusal(resumed)[:2] == (400, "invalid_request"), path


async def test_a_405_names_the_allowed_methods(rig: WebRig) -> None:
    sid = rig.session_id("allow")
    answer = await rig.http.get(f"/api/sessions/{sid}/messages", headers=bearer("read"))
    status, code, message = refusal(answer)
    assert (status, code) == (405, "method_not_allowed")
    assert answer.headers["allow"] == "POST"
    assert "it takes POST" in message


async def test_a_deeply_nested_edit_in_the_form_is_an_error_page(rig: WebRig) -> None:
    sid = rig.session_id("nested")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    async with httpx.AsyncClient(base_url=rig.url, timeout=30) as browser:
        await sign_in(rig, browser)
        page = await browser.get(f"/sessions/{sid}")
        posted = await browser.post(
            f"/sessions/{sid}/approvals/{interrupt_id}/approve",
            data={
                "csrf_token": csrf_of(page),
                "edited_input": "[" * 5000 + "]" * 5000,
            },
        )
    assert posted.status_code == 422, posted.text
    assert "nested too deeply" in posted.text
    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]


async def test_anonymous_loopback_needs_a_loopback_host(
    client: Client, tmp_path: Path
) -> None:
    """A site whose name resolves to 127.0.0.1 (DNS rebinding) is not this machine's user."""
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(
        client, [], store, tokens=role_tokens(), allow_anonymous_loopback=True
    )
    async with serving(app) as server, httpx.AsyncClient(base_url=server.url) as http:
        port = server.url.rsplit(":", 1)[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            whoami = await http.get("/api/whoami", headers={"Host": host})
            assert whoami.json()["name"] == "anonymous (loopback)", host
        rebound = await http.get(
            "/api/whoami", headers={"Host": f"attacker.example:{port}"}
        )
        status, code, message = refusal(rebound)
        assert (status, code) == (401, "unauthorized")
        assert "attacker.example" in message and "localhost" in message
        inbox = await http.get("/inbox", headers={"Host": f"attacker.example:{port}"})
        assert (inbox.status_code, inbox.headers["location"]) == (
            303,
            "/login?next=/inbox",
        )
        # A token still works at any host name.
        named = await http.get(
            "/api/whoami",
            headers={
                "Host": f"attacker.example:{port}",
                "Authorization": "Bearer tok-reader-secret",
            },
        )
        assert named.json()["name"] == "reader"
    await store.close()


async def test_the_sessions_filter_any_and_a_bad_page_query_are_pages(
    rig: WebRig,
) -> None:
    sid = rig.session_id("filter")
    await rig.sessions.start(sid, initial_message="say hi")
    await rig.sessions.wait_for_idle(sid)
    async with httpx.AsyncClient(base_url=rig.url, timeout=30) as browser:
        await sign_in(rig, browser)
        # The filter's "any" option submits `status=`.
        listed = await browser.get("/sessions", params={"status": ""})
        assert listed.status_code == 200, listed.text
        assert sid in listed.text
        wrong = await browser.get("/sessions", params={"status": "sleeping"})
    assert wrong.status_code == 422
    assert wrong.headers["content-type"].startswith("text/html")
    assert "sleeping" in wrong.text and 'id="error-message"' in wrong.text
    # The API's own stays JSON.
    api = await rig.http.get(
        "/api/sessions", params={"status": "sleeping"}, headers=bearer("read")
    )
    assert refusal(api)[:2] == (422, "invalid_request")


async def test_an_empty_message_is_a_schema_mismatch_and_the_schema_says_so(
    rig: WebRig,
) -> None:
    schema = (await rig.http.get("/api/openapi.json")).json()["components"]["schemas"]
    assert schema["SendMessage"]["properties"]["text"]["minLength"] == 1
    sid = rig.session_id("empty-text")
    await rig.sessions.start(sid, initial_message="say hi")
    await rig.sessions.wait_for_idle(sid)

    empty = await rig.http.post(
        f"/api/sessions/{sid}/messages", json={"text": ""}, headers=bearer("chat")
    )
    status, code, message = refusal(empty)
    assert (status, code) == (422, "invalid_request")  # as docs/web.md promises
    assert "body.text: String should have at least 1 character" in message
    assert (await rig.sessions.snapshot(sid)).turn_count == 1  # nothing queued

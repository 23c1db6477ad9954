"""More requests a careless client sends: images a runner cannot send, left-out and malformed bodies.

Against the real app, server and worker (the suite's `rig`): each refusal is a
4xx in the app's error format, names what was sent and says the fix, and
nothing is started, queued or written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from dex_agents.session._json import JsonObject
from dex_agents.session._media import ImageReference
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.stores._media import InMemoryMediaStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.testing import ScriptedRunner
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.web_rig import WebRig, approve_path, bearer, role_tokens

REFUND = 'call create_refund {"orderId": "7"}'
IMAGE = {"media_type": "image/png", "key": "a.png", "sha256": "0" * 64, "size": 3}
JSON = {"Content-Type": "application/json"}
TOO_LONG_ID = "x" * 1001
"""A session ID the library refuses: over 1000 bytes."""
FASTAPI_WORDS = ("Field required", "JSON decode error", "instance of")
"""FastAPI's and pydantic's own phrases, which name neither the value nor the fix."""


def refusal(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    return response.status_code, body["error"]["code"], body["error"]["message"]


async def history_length(client: Client, session_id: str) -> int:
    described = await client.get_workflow_handle(session_id).describe()
    return described.raw_description.workflow_execution_info.history_length


def assert_no_images(response: httpx.Response, session_id: str) -> None:
    status, code, message = refusal(response)
    assert (status, code) == (422, "images_not_supported"), response.text
    assert repr(session_id) in message
    assert "cannot send images" in message
    assert "send text only" in message and "media store" in message


@asynccontextmanager
async def app_of(
    client: Client, flows: Sequence[Any], store: SQLiteRuntimeStore
) -> AsyncIterator[httpx.AsyncClient]:
    """Another app over the same engine and store, serving `flows`."""
    app = create_app(client, flows, store, tokens=role_tokens(), worker_timeout=5.0)
    async with (
        serving(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
    ):
        yield http


# -- images the session's runner cannot send ------------------------------------


async def test_a_message_with_images_the_runner_cannot_send_is_a_422(
    rig: WebRig, client: Client
) -> None:
    # The ledger flow's scripted runner has no media store.
    sid = rig.session_id("no-images")
    await rig.sessions.start(sid, initial_message="say first")
    await rig.sessions.wait_for_idle(sid)
    before = await history_length(client, sid)
    for wait in (False, True):
        sent = await rig.http.post(
            f"/api/sessions/{sid}/messages",
            json={"text": "say look", "images": [IMAGE], "wait": wait},
            headers=bearer("chat"),
        )
        assert_no_images(sent, sid)
    # Nothing queued, nothing written: the session's history did not grow.
    assert await history_length(client, sid) == before
    # The same text without images is taken, and is the only turn that ran.
    sent = await rig.http.post(
        f"/api/sessions/{sid}/messages",
        json={"text": "say plain"},
        headers=bearer("chat"),
    )
    assert (sent.status_code, sent.json()) == (202, {"queued": True})
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert [t.final_text for t in snapshot.turns] == ["said: first", "said: plain"]


async def test_a_start_with_images_the_runner_cannot_send_starts_nothing(
    rig: WebRig, client: Client
) -> None:
    new = rig.session_id("no-images-start")
    started = await rig.http.post(
        "/api/sessions",
        json={"session_id": new, "message": "say look", "images": [IMAGE]},
        headers=bearer("chat"),
    )
    assert_no_images(started, new)
    assert "nothing was started" in refusal(started)[2]
    read = await rig.http.get(f"/api/sessions/{new}", headers=bearer("read"))
    assert refusal(read)[:2] == (404, "session_not_found")

    # An existing ID (start is idempotent) gets nothing queued either.
    existing = rig.session_id("no-images-existing")
    await rig.sessions.start(existing)
    before = await history_length(client, existing)
    again = await rig.http.post(
        "/api/sessions",
        json={"session_id": existing, "message": "say look", "images": [IMAGE]},
        headers=bearer("chat"),
    )
    assert_no_images(again, existing)
    assert await history_length(client, existing) == before
    assert (await rig.sessions.snapshot(existing)).turn_count == 0


async def test_an_app_that_does_not_serve_the_flow_refuses_images_too(
    rig: WebRig, client: Client
) -> None:
    # An app with no flows serves existing sessions: the session itself refuses.
    sid = rig.session_id("no-images-other-app")
    await rig.sessions.start(sid, initial_message="say first")
    await rig.sessions.wait_for_idle(sid)
    async with app_of(client, [], rig.store) as http:
        for wait in (False, True):
            sent = await http.post(
                f"/api/sessions/{sid}/messages",
                json={"text": "say look", "images": [IMAGE], "wait": wait},
                headers=bearer("chat"),
            )
            assert_no_images(sent, sid)
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert [t.final_text for t in snapshot.turns] == ["said: first"]
    assert snapshot.pending_prompts == []


class ImageRunner(ScriptedRunner):
    """A scripted runner that can send images: it answers with their count."""

    def build_user_message_with_images(
        self, text: str, images: Sequence[ImageReference]
    ) -> JsonObject:
        return {
            **self.build_user_message(f"{text} {len(images)}"),
            "images": [i.to_wire() for i in images],
        }


async def test_images_a_runner_can_send_are_queued(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = create_agent_session_flow(ImageRunner(), flow_type)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    ref = await InMemoryMediaStore().put_image(b"\x89PNG pixel", "image/png")
    image = ref.to_wire()
    sessions = SessionClient(client, flow, store)
    async with (
        create_worker(client, [flow], store=store),
        app_of(client, [flow], store) as http,
    ):
        started = await http.post(
            "/api/sessions",
            json={
                "session_id": "pictures",
                "message": "say look",
                "images": [image],
            },
            headers=bearer("chat"),
        )
        assert (started.status_code, started.json()) == (
            201,
            {"session_id": "pictures", "queued": True},
        )
        await sessions.wait_for_idle("pictures")
        sent = await http.post(
            "/api/sessions/pictures/messages",
            json={"text": "say again", "images": [image, image]},
            headers=bearer("chat"),
        )
        assert (sent.status_code, sent.json()) == (202, {"queued": True})
        snapshot = await sessions.wait_for_idle("pictures")
    await store.close()
    assert [t.final_text for t in snapshot.turns] == ["said: look 1", "said: again 2"]


# -- bodies whose fields are all optional -------------------------------------------


async def test_every_body_of_optional_fields_may_be_left_out(rig: WebRig) -> None:
    # No body, an empty body, and JSON `null` (the schema allows it) mean `{}`.
    leave_out: list[dict[str, Any]] = [
        {},
        {"content": b"", "headers": JSON},
        {"content": b"null", "headers": JSON},
    ]
    for how in leave_out:
        kwargs = {**how, "headers": {**how.get("headers", {}), **bearer("chat")}}
        started = await rig.http.post("/api/sessions", **kwargs)
        assert started.status_code == 201, (how, started.text)
        sid = started.json()["session_id"]
        assert started.json() == {"session_id": sid, "queued": True}
        view = await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))
        assert view.json()["snapshot"]["status"] == "idle"

        cancelled = await rig.http.post(f"/api/sessions/{sid}/cancel", **kwargs)
        assert (cancelled.status_code, cancelled.json()) == (200, {"cancelled": False})

        for decision in ("approve", "reject"):
            waiting = rig.session_id(f"optional-{decision}")
            await rig.sessions.start(waiting, initial_message=REFUND)
            interrupt_id = await rig.pending(waiting)
            path = approve_path(waiting, interrupt_id).replace(
                "/approve", f"/{decision}"
            )
            answered = await rig.http.post(
                path,
                **{**kwargs, "headers": {**kwargs["headers"], **bearer("approve")}},
            )
            assert answered.status_code == 200, (how, decision, answered.text)
            assert answered.json()["approved"] == (decision == "approve")

        ended = await rig.http.post(
            f"/api/sessions/{sid}/end",
            **{**kwargs, "headers": {**kwargs["headers"], **bearer("admin")}},
        )
        assert (ended.status_code, ended.json()) == (200, {"ended": True}), how
        assert (await rig.sessions.snapshot(sid)).status == "ended"


# -- bodies that are not a JSON object ------------------------------------------------


async def test_a_body_that_is_not_a_json_object_is_named_with_the_fix(
    rig: WebRig, client: Client
) -> None:
    sid = rig.session_id("bodies")
    await rig.sessions.start(sid, initial_message="say first")
    await rig.sessions.wait_for_idle(sid)
    before = await history_length(client, sid)
    messages = f"/api/sessions/{sid}/messages"
    cases: list[tuple[str, dict[str, Any], Sequence[str]]] = [
        # (path, request, what the message must say)
        (messages, {}, ("body: missing", "application/json", '{"text": "..."}')),
        (
            messages,
            {"content": b'{"text": "say hi",', "headers": JSON},
            ("not valid JSON", '\'{"text": "say hi",\'', "application/json"),
        ),
        (
            messages,
            {
                "content": b'{"text": "say hi"}',
                "headers": {"Content-Type": "text/plain"},
            },
            (
                "`Content-Type: text/plain`",
                '\'{"text": "say hi"}\'',
                "application/json",
            ),
        ),
        (
            messages,
            {"data": {"text": "say hi"}},
            ("application/x-www-form-urlencoded", "'text=say+hi'", "application/json"),
        ),
        (messages, {"json": ["say hi"]}, ("must be a JSON object", 'got ["say hi"]')),
        (messages, {"content": b"null", "headers": JSON}, ("got null",)),
        (messages, {"json": {"text": None}}, ("body.text", "got null")),
        (
            messages,
            {"json": {"text": "say hi", "images": ["a.png"]}},
            ("body.images.0: must be a JSON object", 'got "a.png"'),
        ),
        (
            messages,
            {"json": {"text": "say hi", "images": [{**IMAGE, "sha256": "abc"}]}},
            ("body.images.0.sha256", "64 lowercase hex digits", "got 'abc'"),
        ),
        (
            f"/api/sessions/{sid}/end",
            {"content": b"{reason}", "headers": JSON},
            ("not valid JSON", "'{reason}'", "such as `{}`"),
        ),
        (
            "/api/sessions",
            {"json": {"session_id": TOO_LONG_ID, "message": "say hi"}},
            ("body.session_id", "over the limit of 1000 bytes", "got 'xxx"),
        ),
    ]
    for path, request, says in cases:
        role = "admin" if path.endswith("/end") else "chat"
        kwargs = {**request, "headers": {**request.get("headers", {}), **bearer(role)}}
        answer = await rig.http.post(path, **kwargs)
        status, code, message = refusal(answer)
        assert (status, code) == (422, "invalid_request"), (request, answer.text)
        for words in says:
            assert words in message, (request, message)
        for words in FASTAPI_WORDS:
            assert words not in message, (request, message)
    # Nothing reached the session, and nothing was started.
    assert await history_length(client, sid) == before
    assert (await rig.sessions.snapshot(sid)).status == "idle"
    missing = await rig.http.get(f"/api/sessions/{TOO_LONG_ID}", headers=bearer("read"))
    status, code, message = refusal(missing)
    assert (status, code) == (422, "invalid_request")
    assert "over the limit of 1000 bytes" in message and "got 'xxx" in message


async def test_a_worker_whose_runner_cannot_send_images_refuses_a_start_with_them(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    # The app's copy of the flow can send images; the worker's (the one that
    # counts) cannot: the session refuses the message, and the start says so.
    worker_flow = create_agent_session_flow(ScriptedRunner(), flow_type)
    app_flow = create_agent_session_flow(ImageRunner(), flow_type)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, worker_flow, store)
    async with (
        create_worker(client, [worker_flow], store=store),
        app_of(client, [app_flow], store) as http,
    ):
        started = await http.post(
            "/api/sessions",
            json={"session_id": "mismatch", "message": "say look", "images": [IMAGE]},
            headers=bearer("chat"),
        )
        assert_no_images(started, "mismatch")
        snapshot = await sessions.snapshot("mismatch")
    await store.close()
    assert (snapshot.turn_count, snapshot.pending_prompts) == (0, [])

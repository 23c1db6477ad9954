"""The JSON and SSE endpoints under `/api`, each with the role it needs."""

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Header, Path, Query, Response
from fastapi.routing import APIRoute
from fastapi.types import DecoratedCallable
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask
from starlette.routing import Match
from starlette.types import Scope

from ..session._state import SessionStatus
from ._agui import agui_event
from ._auth import Auth, Caller
from ._errors import ApiError, translated
from ._feed import Feeds, StreamSlot, StreamSlots
from ._models import (
    ApprovalPage,
    ApproveCall,
    Cancelled,
    CancelTurn,
    Ended,
    EndSession,
    ErrorBody,
    HistoryPage,
    Queued,
    Rejection,
    Resolution,
    SendMessage,
    SessionId,
    SessionPage,
    SessionView,
    Started,
    StartSession,
)
from ._service import Service
from ._stream import Delivered, StreamItem, session_stream
from ._tokens import Principal

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in {
        400: "The request cannot be applied (the message says why).",
        401: "No token, or a token this app does not know.",
        403: "The token lacks the role, or a browser request failed the CSRF check.",
        404: "No such session or interrupt.",
        409: "Already answered, or the session ended or is busy.",
        422: "The request does not match this schema, the tool refuses an "
        "edited input (`invalid_edit`: `error.field` names the field), or the "
        "session's runner cannot send images (`images_not_supported`).",
        501: "The core lacks what this needs.",
        503: "No worker took the request in time, or the engine is unreachable.",
        504: "The turn was not over in time.",
    }.items()
}
_SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events; each `id` is the event's cursor.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}
MAX_CURSOR = 2**62
"""Cursors and turn numbers fit a 64-bit integer, as the stores keep them."""
PING_SECONDS = 15
"""A comment line this often keeps proxies from closing an idle stream."""

SessionPath = Annotated[
    SessionId, Path(description="The session's ID, percent-encoded (`/` as `%2F`).")
]
SessionCursor = Annotated[
    SessionId | None,
    Query(description="The `next_before` of the previous page (a session's ID)."),
]
InterruptPath = Annotated[
    str, Path(min_length=1, max_length=200, description="From `pending_interrupts`.")
]

_INTERRUPT = "/sessions/{session_id}/approvals/{interrupt_id}"
"""The path of one interrupt, which `approve` and `reject` answer."""


class SessionRoute(APIRoute):
    """A route whose path parameters may hold any character, `/` too, percent-encoded.

    The server decodes the path before routing, so a session ID such as
    `a;b/ç`, sent as `a%3Bb%2F%C3%A7`, would reach the router as two segments
    and match no route. This route matches the path as it was sent
    (`raw_path`), segment by segment, and decodes each parameter afterwards.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        sent = _as_sent(scope)
        if sent is None:
            return super().matches(scope)
        match, child = super().matches({**scope, "path": sent})
        params: dict[str, Any] = child.get("path_params", {})
        for name in self.param_convertors:
            if isinstance(value := params.get(name), str):
                params[name] = unquote(value)
        return match, child


def _as_sent(scope: Scope) -> str | None:
    """The decoded path with the `/` (and `%`) inside a segment kept escaped.

    None when nothing inside a segment was escaped, or when the path is not
    the decoding of `raw_path` (something rewrote it): then it routes as usual.
    """
    raw = scope.get("raw_path")
    if scope.get("type") != "http" or not isinstance(raw, bytes) or b"%" not in raw:
        return None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    sent = "/".join(
        unquote(part).replace("%", "%25").replace("/", "%2F")
        for part in text.split("/")
    )
    root = str(scope.get("root_path", ""))
    if unquote(sent) != scope.get("path") or not sent.startswith(root):
        return None
    return sent


@dataclass(frozen=True)
class _Answering:
    """What an approve or reject answers, and who: the path's interrupt, the caller."""

    session_id: str
    interrupt_id: str
    principal: Principal


def api_router(
    service: Service, auth: Auth, feeds: Feeds, slots: StreamSlots
) -> APIRouter:
    """The `/api` routes of one app (`slots` caps its open event streams)."""
    router = APIRouter(prefix="/api", responses=_ERRORS, route_class=SessionRoute)
    read = Depends(auth.require("read"))
    chat = Depends(auth.require("chat"))
    approve = Depends(auth.require("approve"))
    admin = Depends(auth.require("admin"))

    @router.get("/whoami", tags=["auth"])
    async def whoami(caller: Annotated[Caller, read]) -> dict[str, Any]:
        """The token's name and the roles it grants."""
        return {"name": caller.principal.name, "roles": sorted(caller.principal.roles)}

    @router.get("/sessions", tags=["sessions"], dependencies=[read])
    async def list_sessions(
        status: SessionStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        before: SessionCursor = None,
    ) -> SessionPage:
        """Sessions, most recently updated first; page with `before` = `next_before`."""
        return await service.list_sessions(status, limit, before)

    @router.post("/sessions", status_code=201, tags=["sessions"], dependencies=[chat])
    async def start_session(body: StartSession | None = None) -> Started:
        """Start a session, with a first message; an existing ID gets the message.

        No body (or `{}`) starts an idle session with a fresh ID. Images the
        flow's runner cannot send are 422 `images_not_supported`, and nothing
        is started or queued.
        """
        return await service.start(body if body is not None else StartSession())

    @router.get("/sessions/{session_id}", tags=["sessions"], dependencies=[read])
    async def get_session(
        session_id: SessionPath, turns: Annotated[int, Query(ge=0, le=200)] = 20
    ) -> SessionView:
        """The snapshot: status, the newest `turns` turns, pending approvals, usage.

        Each pending interrupt's `recorded` is the answer given while no worker
        ran (it applies when a worker starts), or null.
        """
        return await service.view(session_id, turns)

    @router.post(
        "/sessions/{session_id}/messages",
        status_code=202,
        tags=["sessions"],
        dependencies=[chat],
        responses={200: {"model": SessionView, "description": "With `wait`."}},
    )
    async def send_message(
        session_id: SessionPath, body: SendMessage, response: Response
    ) -> Queued | SessionView:
        """Queue a user message (202); with `wait: true`, the snapshot after its turn (200).

        Images the session's runner cannot send are 422 `images_not_supported`,
        and nothing is queued.
        """
        result = await service.send(session_id, body)
        if isinstance(result, SessionView):
            response.status_code = 200
        return result

    @router.get(
        "/sessions/{session_id}/history", tags=["sessions"], dependencies=[read]
    )
    async def session_history(
        session_id: SessionPath,
        before: Annotated[int | None, Query(ge=1, le=MAX_CURSOR)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 20,
    ) -> HistoryPage:
        """Finished turns, newest first; page with `before` = `next_before`."""
        return await service.history(session_id, before, limit)

    @router.post("/sessions/{session_id}/cancel", tags=["sessions"])
    async def cancel_turn(
        session_id: SessionPath,
        caller: Annotated[Caller, chat],
        body: CancelTurn | None = None,
    ) -> Cancelled:
        """Stop the running turn (a Stop button); `cancelled` is False when none runs.

        A running model call stops within about a second, an approval the turn
        waits for is closed (its call never runs), and a tool call already
        running finishes first. The turn ends `cancelled` (event
        `turn_cancelled`, with the token's name as `cancelled_by`), keeping the
        text it had streamed; the next message starts a new turn. Needs a
        worker: with none it is 503 `no_worker`, and nothing changed.
        """
        return await service.cancel(
            session_id, body if body is not None else CancelTurn(), caller.principal
        )

    @router.post("/sessions/{session_id}/end", tags=["sessions"], dependencies=[admin])
    async def end_session(
        session_id: SessionPath, body: EndSession | None = None
    ) -> Ended:
        """End the session: it takes no more messages or approvals (no body: `{}`)."""
        return await service.end(session_id, body if body is not None else EndSession())

    @router.get("/approvals", tags=["approvals"], dependencies=[read])
    async def list_approvals(
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        before: SessionCursor = None,
    ) -> ApprovalPage:
        """Every pending approval, of `limit` sessions at a time (oldest change last).

        One answered while no worker ran is still listed, with its answer as
        `recorded` (it applies when a worker starts); `recorded` is null otherwise.
        """
        return await service.approvals(limit, before)

    async def answering(
        session_id: SessionPath,
        interrupt_id: InterruptPath,
        caller: Annotated[Caller, approve],
    ) -> _Answering:
        """The path's interrupt and who answers it (who needs the `approve` role)."""
        return _Answering(session_id, interrupt_id, caller.principal)

    answers = Depends(answering)

    @router.post(f"{_INTERRUPT}/approve", tags=["approvals"])
    async def approve_call(
        to: Annotated[_Answering, answers], body: ApproveCall | None = None
    ) -> Resolution:
        """Approve the call, with `edited_input` to run it with another input.

        The token's name is recorded as who approved (and edited) it. A refused
        edit answers 422 `invalid_edit`, naming the field; the call still waits.
        A spend-limit interrupt (`kind: budget`) is approved with
        `new_spend_limit`, above what the session spent.
        """
        return await service.resolve(
            to.session_id,
            to.interrupt_id,
            to.principal,
            approved=True,
            edited_input=body.edited_input if body is not None else None,
            new_spend_limit=body.new_spend_limit if body is not None else None,
        )

    @router.post(f"{_INTERRUPT}/reject", tags=["approvals"])
    async def reject_call(
        to: Annotated[_Answering, answers], body: Rejection | None = None
    ) -> Resolution:
        """Reject the call; the model reads `message` instead of a result."""
        return await service.resolve(
            to.session_id, to.interrupt_id, to.principal, approved=False, rejection=body
        )

    async def stream(
        session_id: SessionPath,
        caller: Annotated[Caller, read],
        after: Annotated[int, Query(ge=0, le=MAX_CURSOR)] = 0,
        until: Literal["idle"] | None = None,
        last_event_id: Annotated[str | None, Header(max_length=40)] = None,
    ) -> _Following:
        """The items an events endpoint streams (the query of both of them)."""
        cursor = _resume_cursor(after, last_event_id)
        with translated(session_id):
            await service.require_session(session_id)  # 404 for no such session
        slot = slots.take(caller.principal.name)  # 429 past a cap
        items = session_stream(
            feeds,
            session_id,
            after=cursor,
            until_idle=until == "idle",
        )
        return _Following(items, slot)

    streamed = Depends(stream)

    def events_route(path: str) -> Callable[[DecoratedCallable], DecoratedCallable]:
        return router.get(
            path,
            tags=["events"],
            dependencies=[read],
            response_class=EventSourceResponse,
            responses=_SSE,
        )

    @events_route("/sessions/{session_id}/events")
    async def session_events(
        following: Annotated[_Following, streamed],
    ) -> EventSourceResponse:
        """The session's events as SSE, after cursor `after` (or `Last-Event-ID`).

        Each event's `data` is JSON with its `cursor`, `type`, `turn_id`,
        `step_execution_id`, `attempt`, `superseded` and `data`; an
        `attempt_superseded` item (no `id`) says to drop what lower attempts
        of a step showed. `until=idle` ends the stream once the session waits.
        """

        async def frames() -> AsyncIterator[ServerSentEvent]:
            async for item in following.items():
                cursor = str(item.event.cursor) if isinstance(item, Delivered) else None
                yield ServerSentEvent(data=json.dumps(item.json()), id=cursor)

        return following.response(frames())

    @events_route("/sessions/{session_id}/events/ag-ui")
    async def session_events_agui(
        session_id: SessionPath, following: Annotated[_Following, streamed]
    ) -> EventSourceResponse:
        """The same events in the AG-UI format (thread = session, run = turn)."""

        async def frames() -> AsyncIterator[ServerSentEvent]:
            async for item in following.items():
                event = agui_event(session_id, item)
                if event is None:
                    continue
                cursor = str(item.event.cursor) if isinstance(item, Delivered) else None
                yield ServerSentEvent(
                    data=event.model_dump_json(by_alias=True), id=cursor
                )

        return following.response(frames())

    return router


class _Following:
    """One event stream's items and its slot among the app's open streams."""

    def __init__(self, items: AsyncIterator[StreamItem], slot: StreamSlot) -> None:
        self._items = items
        self._slot = slot

    async def items(self) -> AsyncIterator[StreamItem]:
        """The items; the slot is free again when the stream ends, however it ends."""
        try:
            async for item in self._items:
                yield item
        finally:
            self._slot.release()

    def response(self, frames: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
        """The SSE response of `frames`; it frees the slot even if `frames` never started."""
        return EventSourceResponse(
            frames,
            ping=PING_SECONDS,
            headers=_NO_BUFFER,
            background=BackgroundTask(self._slot.release),
        )


_NO_BUFFER = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}
"""Tell nginx (and caches) to pass each event on at once."""


def _resume_cursor(after: int, last_event_id: str | None) -> int:
    """Where to resume: `Last-Event-ID` (a reconnect) wins over `after`."""
    if last_event_id is None or not last_event_id.strip():
        return after
    value = last_event_id.strip()
    # `isdigit` alone takes `²`, which `int` refuses: ASCII digits only.
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_CURSOR:
        raise ApiError(
            400,
            "invalid_request",
            f"`Last-Event-ID` must be an event's cursor (a number), got {value!r}; "
            "send the `id` of the last event received",
        )
    return int(value)

"""The approval inbox: server-rendered pages, forms that work without a script, live updates.

Pages are Jinja2 templates with autoescaping on, so every value from a model,
a tool or a person is text, never markup; JSON inputs are rendered as plain
strings (escaped like any other), and the vendored script builds live
content with `textContent` only. Responses carry a Content-Security-Policy
that allows this app's own script and nothing inline, so even a value that
slipped through could not run. Forms post with the double-submit CSRF token
(`_auth`).
"""

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast
from urllib.parse import quote

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..session._events import parsed_time
from ..session._json import JsonObject
from ..session._state import SessionStatus
from ..stores._cursors import cursor_before_turn
from ..temporal._client import recorded_answer_text
from ._api import SessionCursor, SessionRoute
from ._auth import CSRF_COOKIE, TOKEN_COOKIE, Auth, Caller, new_csrf_token
from ._errors import (
    ApiError,
    error_response,
    invalid_request,
    translated,
)
from ._models import CancelTurn, RecordedAnswer, Rejection, SendMessage, SessionId
from ._service import Service
from ._tokens import Principal, Role

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_STATUSES: tuple[SessionStatus, ...] = (
    "idle",
    "running",
    "waiting_for_approval",
    "budget_reached",
    "ended",
)
_ENDED_TURNS = ("completed", "failed", "cancelled")
"""Turn statuses the session page renders from the snapshot (the rest stream live)."""
_BUSY: tuple[SessionStatus, ...] = ("running", "waiting_for_approval", "budget_reached")
"""Session statuses with a turn in progress: the page's Stop button shows."""


class LoginRequired(Exception):
    """A page needs a signed-in browser: send it to the login form."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


class PageError(Exception):
    """An `ApiError` met on a page: shown as a page, not as JSON."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _pretty_json(value: object) -> str:
    """A plain string (not markup): autoescaping turns `<` into text."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _usd(arguments: object, key: str) -> str:
    """A budget interrupt's amount (`spent_usd`, `spend_limit_usd`) to 4 decimals."""
    value = (
        cast(dict[str, object], arguments).get(key)
        if isinstance(arguments, dict)
        else None
    )
    return f"{value:.4f}" if isinstance(value, int | float) else "?"


def _recorded_text(recorded: RecordedAnswer, kind: str) -> str:
    """An answer recorded while no worker ran, as `dex-agents show` says it.

    dex.js's `recordedText` says the same.
    """
    return recorded_answer_text(
        approved=recorded.approved,
        resolved_by=recorded.resolved_by,
        rejection_message=recorded.rejection_message,
        new_spend_limit=recorded.new_spend_limit,
        budget=kind == "budget",
    )


def _path(value: object) -> str:
    """`value` as one URL path segment."""
    return quote(str(value), safe="")


def _age(created_at: str) -> str:
    created = parsed_time(created_at)
    if created is None:
        return ""
    seconds = int(max(0.0, (datetime.now(UTC) - created).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def templates() -> jinja2.Environment:
    """The page templates, with autoescaping on for every template."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dex_agents.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    # jinja2 leaves `filters` as dict[str, Unknown] (inferred from its own table).
    filters = cast(dict[str, Callable[..., str]], env.filters)  # pyright: ignore[reportUnknownMemberType]
    filters["pretty_json"] = _pretty_json
    filters["usd"] = _usd
    filters["age"] = _age
    filters["path"] = _path
    filters["recorded_text"] = _recorded_text
    return env


def install_page_handlers(app: FastAPI, env: jinja2.Environment) -> None:
    """Show page errors as pages, and send signed-out browsers to `/login`."""

    async def login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/login?next={quote(exc.target)}", 303)

    async def page_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError)
        return _render(
            env,
            request,
            "error.html",
            {"error": exc.error, "caller_name": ""},
            status=exc.error.status,
        )

    async def invalid(request: Request, exc: Exception) -> Response:
        # A page's query or form that does not validate is an error page, as
        # its other errors are; the API's stays JSON.
        assert isinstance(exc, RequestValidationError)
        error = invalid_request(exc, request)
        path = request.url.path.removeprefix(request.scope.get("root_path", ""))
        if path == "/api" or path.startswith("/api/"):
            return error_response(error.status, error.code, error.message)
        return _render(
            env,
            request,
            "error.html",
            {"error": error, "caller_name": ""},
            status=error.status,
        )

    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(PageError, page_error)
    app.add_exception_handler(RequestValidationError, invalid)


def _render(
    env: jinja2.Environment,
    request: Request,
    name: str,
    context: dict[str, Any],
    *,
    status: int = 200,
) -> HTMLResponse:
    """A page, with the CSRF cookie set (when new) and the security headers."""
    csrf = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
    base = request.scope.get("root_path", "")
    body = env.get_template(name).render(
        base=base,
        csrf=csrf,
        signed_in=bool(request.cookies.get(TOKEN_COOKIE)),
        **context,
    )
    response = HTMLResponse(body, status)
    if request.cookies.get(CSRF_COOKIE) != csrf:
        # Readable by scripts (double-submit: a script of this origin copies it
        # into `X-CSRF-Token`); another site can neither read nor send it.
        _set_cookie(response, request, CSRF_COOKIE, csrf, httponly=False)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def _set_cookie(
    response: Response,
    request: Request,
    name: str,
    value: str,
    *,
    httponly: bool = True,
) -> None:
    """Set cookie `name` for this app's paths: same-site, secure on HTTPS.

    HTTP-only unless `httponly=False`: the token's cookie always is (a script
    injected into a page could not steal it); the CSRF cookie is not, since
    scripts of this origin send its value back in a header.
    """
    response.set_cookie(
        name,
        value,
        httponly=httponly,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=request.scope.get("root_path", "") or "/",
    )


def page_router(service: Service, auth: Auth, env: jinja2.Environment) -> APIRouter:
    """The inbox's HTML routes of one app (left out of the OpenAPI schema)."""
    router = APIRouter(include_in_schema=False, route_class=SessionRoute)

    def page(role: Role) -> Callable[[Request], Awaitable[Caller]]:
        check = auth.require(role)

        async def dependency(request: Request) -> Caller:
            try:
                return await check(request)
            except ApiError as err:
                if err.status == 401 and request.method == "GET":
                    raise LoginRequired(request.url.path) from err
                raise PageError(err) from err

        return dependency

    read = Depends(page("read"))
    chat = Depends(page("chat"))
    approve = Depends(page("approve"))

    def back(request: Request, session_id: str, target: str) -> RedirectResponse:
        base = request.scope.get("root_path", "")
        if target == "session":
            return RedirectResponse(
                f"{base}/sessions/{quote(session_id, safe='')}", 303
            )
        return RedirectResponse(f"{base}/inbox", 303)

    @router.get("/")
    async def home(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{request.scope.get('root_path', '')}/inbox", 303)

    @router.get("/login")
    async def login_form(
        request: Request, next: Annotated[str, Query(max_length=500)] = ""
    ) -> HTMLResponse:
        return _render(
            env,
            request,
            "login.html",
            {"next": next, "failed": False, "caller_name": ""},
        )

    @router.post(
        "/login",
        # Three short text fields and no files (a multipart file would be
        # spooled before the handler runs); `create_app` caps the body too.
        form_limits={"max_fields": 3, "max_files": 0, "max_part_size": 2048},
    )
    async def login(
        request: Request,
        token: Annotated[str, Form(max_length=500)],
        next: Annotated[str, Form(max_length=500)] = "",
    ) -> Response:
        try:
            await auth.check_browser_request(request)
        except ApiError as err:
            raise PageError(err) from err
        principal = auth.tokens.remembered(token) or await _verify(auth, token)
        if principal is None:
            return _render(
                env,
                request,
                "login.html",
                {"next": next, "failed": True, "caller_name": ""},
                status=401,
            )
        base = request.scope.get("root_path", "")
        # Only a path of this app: never an open redirect to another site.
        target = next if next.startswith(f"{base}/") and "//" not in next else ""
        response = RedirectResponse(target or f"{base}/inbox", 303)
        _set_cookie(response, request, TOKEN_COOKIE, token)
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        try:
            await auth.check_browser_request(request)
        except ApiError as err:
            raise PageError(err) from err
        base = request.scope.get("root_path", "")
        response = RedirectResponse(f"{base}/login", 303)
        response.delete_cookie(TOKEN_COOKIE, path=base or "/")
        return response

    @router.get("/inbox")
    async def inbox(request: Request, caller: Annotated[Caller, read]) -> HTMLResponse:
        try:
            page_ = await service.approvals(500, None)
        except ApiError as err:
            raise PageError(err) from err
        return _render(
            env,
            request,
            "inbox.html",
            {
                "approvals": page_.approvals,
                "caller_name": caller.principal.name,
                "may_approve": caller.principal.may("approve"),
            },
        )

    @router.get("/sessions")
    async def sessions_page(
        request: Request,
        caller: Annotated[Caller, read],
        status: SessionStatus | Literal[""] | None = None,
        before: SessionCursor = None,
    ) -> HTMLResponse:
        status = status or None  # the filter's "any" sends `status=`
        try:
            listing = await service.list_sessions(status, 50, before)
        except ApiError as err:
            raise PageError(err) from err
        return _render(
            env,
            request,
            "sessions.html",
            {
                "page": listing,
                "status": status,
                "statuses": _STATUSES,
                "caller_name": caller.principal.name,
            },
        )

    @router.get("/sessions/{session_id}")
    async def session_page(
        request: Request, session_id: SessionId, caller: Annotated[Caller, read]
    ) -> HTMLResponse:
        try:
            view = await service.view(session_id, 20)
        except ApiError as err:
            raise PageError(err) from err
        snapshot = view.snapshot
        finished = [t for t in snapshot.turns if t.status in _ENDED_TURNS]
        live = [t for t in snapshot.turns if t.status not in _ENDED_TURNS]
        first_live = (
            int(live[0].turn_id.rpartition("-")[2]) if live else snapshot.turn_count + 1
        )
        with translated(session_id):
            after = await cursor_before_turn(service.store, session_id, first_live)
        return _render(
            env,
            request,
            "session.html",
            {
                "s": snapshot,
                "finished": finished,
                "live": live,
                "after": after,
                "caller_name": caller.principal.name,
                "may_chat": caller.principal.may("chat"),
                "may_approve": caller.principal.may("approve"),
                "busy": snapshot.status in _BUSY,
            },
        )

    async def decide(
        request: Request,
        session_id: str,
        interrupt_id: str,
        caller: Caller,
        approved: bool,
        message: str | None,
        target: str,
        edited_input: JsonObject | None = None,
        new_spend_limit: float | None = None,
    ) -> Response:
        try:
            await service.resolve(
                session_id,
                interrupt_id,
                caller.principal,
                approved=approved,
                rejection=Rejection(message=message or None),
                edited_input=edited_input,
                new_spend_limit=new_spend_limit,
            )
        except ApiError as err:
            raise PageError(err) from err
        return back(request, session_id, target)

    @router.post("/sessions/{session_id}/approvals/{interrupt_id}/approve")
    async def approve_form(
        request: Request,
        session_id: SessionId,
        interrupt_id: str,
        caller: Annotated[Caller, approve],
        next: Annotated[Literal["inbox", "session"], Form()] = "inbox",
        edited_input: Annotated[str | None, Form(max_length=1_000_000)] = None,
        new_spend_limit: Annotated[str | None, Form(max_length=100)] = None,
    ) -> Response:
        edit = None if edited_input is None else _edited_input(edited_input)
        limit = None if new_spend_limit is None else _spend_limit(new_spend_limit)
        return await decide(
            request, session_id, interrupt_id, caller, True, None, next, edit, limit
        )

    @router.post("/sessions/{session_id}/approvals/{interrupt_id}/reject")
    async def reject_form(
        request: Request,
        session_id: SessionId,
        interrupt_id: str,
        caller: Annotated[Caller, approve],
        message: Annotated[str, Form(max_length=10_000)] = "",
        next: Annotated[Literal["inbox", "session"], Form()] = "inbox",
    ) -> Response:
        return await decide(
            request, session_id, interrupt_id, caller, False, message, next
        )

    @router.post("/sessions/{session_id}/cancel")
    async def cancel_form(
        request: Request,
        session_id: SessionId,
        caller: Annotated[Caller, chat],
        reason: Annotated[str, Form(max_length=2_000)] = "",
    ) -> Response:
        try:
            await service.cancel(
                session_id, CancelTurn(reason=reason), caller.principal
            )
        except ApiError as err:
            raise PageError(err) from err
        return back(request, session_id, "session")

    @router.post("/sessions/{session_id}/messages")
    async def message_form(
        request: Request,
        session_id: SessionId,
        caller: Annotated[Caller, chat],
        text: Annotated[str, Form(min_length=1, max_length=1_000_000)],
    ) -> Response:
        try:
            await service.send(session_id, SendMessage(text=text))
        except ApiError as err:
            raise PageError(err) from err
        return back(request, session_id, "session")

    return router


def _edited_input(text: str) -> JsonObject:
    """The "Edit & approve" form's input: a JSON object, else a page saying why."""
    try:
        value: object = json.loads(text, parse_constant=_no_constant)
    except ValueError as err:
        problem = f"it is not JSON ({err})"
    except RecursionError:
        problem = "it is nested too deeply to read"
    else:
        if isinstance(value, dict):
            return cast(JsonObject, value)
        problem = "it is not a JSON object ({...})"
    raise PageError(
        ApiError(
            422,
            "invalid_edit",
            f"the edited input was not sent: {problem}; go back, fix it and approve "
            "again, or approve without an edit",
            field="",
        )
    )


def _spend_limit(text: str) -> float:
    """The budget form's "new limit (USD)": a positive, finite number, else a page saying why."""
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value > 0:
        return value
    raise PageError(
        ApiError(
            400,
            "invalid_request",
            f"the new limit was not sent: {text!r} is not a positive number of USD; "
            "go back and type a limit above what the session spent, or decline",
        )
    )


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


async def _verify(auth: Auth, token: str) -> Principal | None:
    # scrypt takes tens of milliseconds: keep the event loop free.
    return await asyncio.to_thread(auth.tokens.verify, token)

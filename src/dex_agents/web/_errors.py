"""Errors as JSON: `{"error": {"code": ..., "message": ...}}`, whose message says the fix.

Every failure a client can see goes through here: the app's own refusals
(`ApiError`), request validation, unknown routes, the library's errors
(`translate`), and anything unexpected (a 500 that names no internals).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
from collections.abc import Generator, Mapping, Sequence
from typing import Any, Literal, cast
from urllib.parse import quote

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from .._errors import (
    EngineError,
    IdleTimeoutError,
    InvalidEditError,
    NoWorkerError,
    SessionBusyError,
    SessionEndedError,
    StoreUnavailableError,
    UnknownInterruptError,
    UserError,
)
from ..temporal._workflow import NO_IMAGES

_log = logging.getLogger(__name__)

ErrorCode = Literal[
    "unauthorized",
    "forbidden",
    "csrf_failed",
    "not_found",
    "session_not_found",
    "interrupt_not_found",
    "method_not_allowed",
    "invalid_request",
    "too_large",
    "invalid_edit",
    "images_not_supported",
    "already_resolved",
    "session_ended",
    "session_busy",
    "too_many_streams",
    "not_implemented",
    "no_worker",
    "store_unavailable",
    "engine_unavailable",
    "timeout",
    "internal",
]
"""Every `error.code` the API answers with (the OpenAPI schema lists them)."""


class ApiError(Exception):
    """A refusal with its HTTP status, a stable `code`, and a message that says the fix.

    `field` names the input field an `invalid_edit` refuses (`orderId`,
    `items[0].sku`; empty for the input as a whole); None for other errors.
    """

    def __init__(
        self, status: int, code: ErrorCode, message: str, *, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code: ErrorCode = code
        self.message = message
        self.field = field


def error_response(
    status: int, code: ErrorCode, message: str, *, field: str | None = None
) -> JSONResponse:
    """The JSON body of an error, with `WWW-Authenticate` on a 401 as HTTP asks."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    detail: dict[str, str] = {"code": code, "message": message}
    if field is not None:
        detail["field"] = field
    return JSONResponse({"error": detail}, status, headers=headers)


def _not_found(session_id: str) -> ApiError:
    return ApiError(
        404,
        "session_not_found",
        f"no session {session_id!r}; list sessions with `GET /api/sessions`, or "
        "start it with `POST /api/sessions`",
    )


def _no_interrupt(err: UnknownInterruptError) -> ApiError:
    """The 404 of an interrupt the session never created, naming where the API lists them."""
    path = quote(err.session_id, safe="")
    return ApiError(
        404,
        "interrupt_not_found",
        f"session {err.session_id!r} has no interrupt {err.interrupt_id!r}; read "
        f"`pending_interrupts` from `GET /api/sessions/{path}`, or list every "
        "approval waiting with `GET /api/approvals`, for valid IDs",
    )


def images_not_supported(session_id: str, *, started: bool = False) -> ApiError:
    """The 422 of a message with images that the session's runner cannot send.

    Nothing was queued (and, for a start refused before it reached the engine,
    nothing was started): the same message without images, or the same one
    once the agent definition has a media store, applies.
    """
    nothing = "nothing was started or queued" if started else "nothing was queued"
    return ApiError(
        422,
        "images_not_supported",
        f"session {session_id!r} cannot take this message: this session's runner "
        f"cannot send images, so {nothing}; send text only (leave out `images`), "
        "or give the agent definition a media store "
        "(`ClaudeAgentDefinition(media_store=...)`) and restart its workers",
    )


def _is_no_images(err: UserError) -> bool:
    """Whether `err` is the session's refusal of images its runner cannot send."""
    cause = err.__cause__
    if (
        isinstance(cause, WorkflowUpdateFailedError)
        and isinstance(cause.cause, ApplicationError)
        and cause.cause.type == NO_IMAGES
    ):
        return True
    # `send_and_wait` against a worker of an older release says it in its own words.
    return "runner cannot send images" in str(err)


def translate(err: Exception, session_id: str = "") -> ApiError | None:
    """The API's answer to one of the library's errors, or None for a bug (a 500)."""
    match err:
        case ApiError():
            return err
        case UnknownInterruptError():
            return _no_interrupt(err)
        case InvalidEditError():
            # The call still waits: the same approval with a fixed edit can apply.
            return ApiError(422, "invalid_edit", str(err), field=err.field)
        case SessionEndedError():
            return ApiError(409, "session_ended", str(err))
        case SessionBusyError():
            return ApiError(
                409,
                "session_busy",
                f"{err}; wait until it is idle, or end it with `force: true`",
            )
        case UserError() if "unknown session" in str(err):
            return _not_found(session_id)
        case UserError() if _is_no_images(err):
            return images_not_supported(session_id)
        case UserError():
            return ApiError(400, "invalid_request", str(err))
        case StoreUnavailableError():
            # The store is down or locked for a moment: asking again helps.
            return ApiError(503, "store_unavailable", str(err))
        case NoWorkerError() if err.superseded is not None:
            # An answer the other way is recorded first: this one would not apply.
            return ApiError(409, "already_resolved", f"{err}; nothing changed")
        case NoWorkerError():
            return ApiError(503, "no_worker", str(err))
        case IdleTimeoutError():
            return ApiError(504, "timeout", str(err))
        case EngineError() if _is_not_found(err.__cause__):
            return _not_found(session_id)
        case EngineError():
            return ApiError(503, "engine_unavailable", str(err))
        case RPCError() if err.status == RPCStatusCode.NOT_FOUND:
            return _not_found(session_id)
        case RPCError():
            return ApiError(
                503,
                "engine_unavailable",
                f"the Temporal engine refused the request: {err.message}; try "
                "again later, and check that the engine runs and this app can "
                "reach it",
            )
        case _:
            return None


def _is_not_found(cause: BaseException | None) -> bool:
    return isinstance(cause, RPCError) and cause.status == RPCStatusCode.NOT_FOUND


@contextlib.contextmanager
def translated(session_id: str = "") -> Generator[None, None, None]:
    """Raise the library's errors inside as `ApiError`s; others propagate (a 500)."""
    try:
        yield
    except Exception as err:
        api = translate(err, session_id)
        if api is None or api is err:
            raise
        raise api from err


MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body the app reads (a larger one is 413 `too_large`,
refused before it is read and before the token is checked): twice the largest
message, so a 32 MiB message fits even with its JSON escapes (`\\n`, `\\uXXXX`)."""
LOGIN_BODY_BYTES = 16 * 1024
"""The largest body of `POST /login`: a form of three short fields."""


_UNKNOWN_KEY = frozenset({"unexpected_keyword_argument", "extra_forbidden"})
_NOT_AN_OBJECT = frozenset({"dataclass_type", "model_type", "dict_type"})
"""Validation errors of a value that should have been a JSON object."""
_PATTERNS = {
    "sha256": "must be the image's SHA-256 as 64 lowercase hex digits "
    "(as `MediaStore.put_image` returns it)",
}
"""What a field's pattern means, by field name, for a value that does not match it."""
_SHOWN_INPUT = 60
"""Characters of a refused value quoted in the message."""
_AS_JSON = "with `Content-Type: application/json`"


def _shown(value: object, *, as_json: bool = False) -> str:
    """`value` quoted for a message (as the JSON the client sent, when `as_json`)."""
    if isinstance(value, bytes):
        # Cut first: a body of many MiB is never copied whole into its repr.
        value = value[: _SHOWN_INPUT * 4].decode("utf-8", "replace")
        as_json = False
    value = _trimmed(value)
    shown = repr(value)
    if as_json:
        with contextlib.suppress(TypeError, ValueError):
            shown = json.dumps(value, ensure_ascii=False)
    if len(shown) > _SHOWN_INPUT:
        shown = shown[:_SHOWN_INPUT] + "…"
    return shown


def _trimmed(value: object, depth: int = 0) -> object:
    """`value` cut to what `_shown` can show, so its repr never copies a huge body.

    Strings keep one character more than shown (so the cut is marked), lists
    and objects their first few items (then `…`), nesting a few levels.
    """
    if isinstance(value, str):
        return value[: _SHOWN_INPUT + 1]
    if isinstance(value, list | tuple):
        sequence = cast(Sequence[object], value)
        items = list(sequence[:_SHOWN_ITEMS])
        if depth >= _SHOWN_DEPTH:
            return ["…"] if items else []
        cut = [_trimmed(item, depth + 1) for item in items]
        return [*cut, "…"] if len(sequence) > _SHOWN_ITEMS else cut
    if isinstance(value, dict):
        mapping = cast(dict[object, object], value)
        pairs = list(itertools.islice(mapping.items(), _SHOWN_ITEMS))
        if depth >= _SHOWN_DEPTH:
            return {"…": "…"} if pairs else {}
        cut_map = {_trimmed(k, depth + 1): _trimmed(v, depth + 1) for k, v in pairs}
        if len(mapping) > _SHOWN_ITEMS:
            cut_map["…"] = "…"
        return cut_map
    return value


_SHOWN_ITEMS = 8
_SHOWN_DEPTH = 3


def _problem(
    error: Mapping[str, Any], request: Request | None, raw_body: object
) -> str:
    """One validation error: where, what is wrong, and the value that was sent."""
    loc: Sequence[object] = error.get("loc", ())
    where = ".".join(str(p) for p in loc)
    kind = error.get("type")
    value = error.get("input")
    if kind in _UNKNOWN_KEY:
        return f"{where}: not a field of this request (misspelled?)"
    if loc[:1] == ("body",) and kind == "json_invalid":
        reason = str(error.get("ctx", {}).get("error", "")) or "not JSON"
        at = f" at character {loc[1]}" if len(loc) > 1 else ""
        return (
            f"body: not valid JSON ({reason}{at}), got {_shown(raw_body)}; send a "
            f"JSON object {_AS_JSON}, such as {_example(request)}"
        )
    if tuple(loc) == ("body",) and kind == "missing":
        return (
            f"body: missing; send a JSON object {_AS_JSON}, such as {_example(request)}"
        )
    if tuple(loc) == ("body",) and kind in _NOT_AN_OBJECT and isinstance(value, bytes):
        # FastAPI passes a body it did not read as JSON on as bytes.
        sent = request.headers.get("content-type") if request is not None else None
        as_what = f"`Content-Type: {sent}`" if sent else "no `Content-Type`"
        return (
            f"body: sent with {as_what}, got {_shown(value)}; send it as a JSON "
            f"object {_AS_JSON}, such as {_example(request)}"
        )
    if kind in _NOT_AN_OBJECT:
        such = f" such as {_example(request)}" if tuple(loc) == ("body",) else ""
        return (
            f"{where}: must be a JSON object{such}, got {_shown(value, as_json=True)}"
        )
    message = str(error.get("msg", ""))
    if kind == "string_pattern_mismatch" and loc and str(loc[-1]) in _PATTERNS:
        message = _PATTERNS[str(loc[-1])]
    if kind == "missing" or isinstance(value, dict | list):
        return f"{where}: {message}"
    return f"{where}: {message}, got {_shown(value, as_json=value is None)}"


def _example(request: Request | None) -> str:
    """The smallest JSON body the request's endpoint takes: its required fields, or `{}`."""
    route = request.scope.get("route") if request is not None else None
    body: object = getattr(getattr(route, "body_field", None), "field_info", None)
    model: object = getattr(body, "annotation", None)
    required = (
        [
            f.name
            for f in dataclasses.fields(model)
            if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if isinstance(model, type) and dataclasses.is_dataclass(model)
        else []
    )
    return f"`{json.dumps(dict.fromkeys(required, '...'))}`"


def invalid_request(
    exc: RequestValidationError, request: Request | None = None
) -> ApiError:
    """The 422 of a request that does not match its endpoint, naming each problem."""
    problems = "; ".join(_problem(e, request, exc.body) for e in exc.errors())
    return ApiError(
        422,
        "invalid_request",
        f"the request does not match the API ({problems}); see `/api/openapi.json`",
    )


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error of `app` as JSON."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, field=exc.field)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        error = invalid_request(exc, request)
        return error_response(error.status, error.code, error.message)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:
            # HTTP requires `Allow` on a 405; Starlette's router puts it on the exception.
            allowed = (exc.headers or {}).get("Allow")
            methods = f"it takes {allowed}" if allowed else "see `/api/openapi.json`"
            response = error_response(
                405,
                "method_not_allowed",
                f"{request.method} is not allowed on {request.url.path}; {methods}",
            )
            if allowed:
                response.headers["Allow"] = allowed
            return response
        if exc.status_code == 404:
            return error_response(
                404,
                "not_found",
                f"no such path {request.url.path!r}; see `/api/openapi.json`",
            )
        if isinstance(exc, _BodyTooLarge):
            return too_large(exc.limit)
        return error_response(exc.status_code, "invalid_request", str(exc.detail))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _internal(request, exc)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    # Starlette answers a handler of `Exception` in its outermost middleware,
    # outside CORS; this middleware answers first, inside the middleware that
    # `create_app` adds later, so a front end on another origin can read a 500
    # too. The handler stays for a failure of that middleware itself.
    app.add_middleware(_UnexpectedErrors)
    app.add_exception_handler(Exception, unexpected)


def too_large(limit: int) -> JSONResponse:
    """The 413 of a body over `limit` bytes, naming the limit and the fix."""
    if limit >= MAX_BODY_BYTES:
        what = "a request body"
        hint = (
            "; a message is at most 32 MiB of UTF-8: send a longer text as "
            "several messages"
        )
    else:
        what = "this request's body"
        hint = ""
    return error_response(
        413,
        "too_large",
        f"{what} is at most {_bytes(limit)}, and this one is larger, so it was "
        f"refused{hint}",
    )


class _BodyTooLarge(HTTPException):
    """A streamed body passed its limit while the app read it.

    FastAPI's HTTPException, so the route that was reading the body raises it
    as it is (any other error there becomes a 400) and the handler of
    HTTP errors answers it as `too_large`.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"over {limit} bytes")
        self.limit = limit


class BodyLimit:
    """ASGI middleware: refuse a request body over its path's limit before it is read.

    A `Content-Length` over the limit is answered 413 at once; a body sent
    without one (chunked) is counted as the app reads it and refused at the
    byte that passes the limit. Bodies are read before the token is checked,
    so this holds for anyone who can reach the port.
    """

    def __init__(self, app: ASGIApp, limits: Mapping[str, int], default: int) -> None:
        self.app = app
        self.limits = limits
        self.default = default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", "")).removeprefix(str(scope.get("root_path", "")))
        limit = self.limits.get(path, self.default)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await too_large(limit)(scope, receive, send)
            return
        read = 0

        async def counted() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    raise _BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    """The request's declared `Content-Length`; None when absent or not a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                return int(value)
            return None
    return None


def _bytes(count: int) -> str:
    """`count` bytes as a person reads it: `64 MiB (67108864 bytes)`, `16 KiB (16384 bytes)`."""
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit} ({count} bytes)"
    return f"{count} bytes"


def _internal(request: Request, exc: BaseException) -> JSONResponse:
    """The 500 of an unexpected error, logged with its traceback; no internals shown."""
    _log.error(
        "unexpected error in %s %s",
        request.method,
        request.url.path,
        exc_info=exc,
    )
    return error_response(
        500,
        "internal",
        "the server failed on this request (a bug; its log has the details); "
        "retrying will not help until it is fixed",
    )


class _UnexpectedErrors:
    """ASGI middleware: an exception no handler took, answered as the JSON 500.

    Only before the response started: a stream that fails midway is cut, as
    any server cuts it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            await _internal(Request(scope), exc)(scope, receive, send)

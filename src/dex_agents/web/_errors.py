"""Errors as JSON: `{"error": {"code": ..., "message": ...}}`, whose message says the fix.

Every failure a client can see goes through here: the app's own refusals
(`ApiError`), request validation, unknown routes, the library's errors
(`translate`), and anything unexpected (a 500 that names no internals).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Generator, Mapping
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.service import RPCError, RPCStatusCode

from .._errors import (
    EngineError,
    IdleTimeoutError,
    InvalidEditError,
    NoWorkerError,
    SessionBusyError,
    SessionEndedError,
    UnknownInterruptError,
    UserError,
)

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
    "invalid_edit",
    "already_resolved",
    "session_ended",
    "session_busy",
    "not_implemented",
    "no_worker",
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


def translate(err: Exception, session_id: str = "") -> ApiError | None:
    """The API's answer to one of the library's errors, or None for a bug (a 500)."""
    match err:
        case ApiError():
            return err
        case UnknownInterruptError():
            return ApiError(404, "interrupt_not_found", str(err))
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
        case UserError():
            return ApiError(400, "invalid_request", str(err))
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
                f"the Temporal engine refused the request: {err.message}; check "
                "that the engine runs and this app can reach it",
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


_UNKNOWN_KEY = frozenset({"unexpected_keyword_argument", "extra_forbidden"})
_SHOWN_INPUT = 60
"""Characters of a refused value quoted in the message."""


def _problem(error: Mapping[str, Any]) -> str:
    """One validation error: where, what is wrong, and the value that was sent."""
    where = ".".join(str(p) for p in error.get("loc", ()))
    if error.get("type") in _UNKNOWN_KEY:
        return f"{where}: not a field of this request (misspelled?)"
    message = str(error.get("msg", ""))
    value = error.get("input")
    if value is None or isinstance(value, dict | list):
        return f"{where}: {message}"
    shown = repr(value)
    if len(shown) > _SHOWN_INPUT:
        shown = shown[:_SHOWN_INPUT] + "…"
    return f"{where}: {message}, got {shown}"


def invalid_request(exc: RequestValidationError) -> ApiError:
    """The 422 of a request that does not match its endpoint, naming each problem."""
    problems = "; ".join(_problem(e) for e in exc.errors())
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
        error = invalid_request(exc)
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
        return error_response(exc.status_code, "invalid_request", str(exc.detail))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.exception("unexpected error in %s %s", request.method, request.url.path)
        return error_response(
            500,
            "internal",
            "the server failed on this request (a bug; its log has the details); "
            "retrying will not help until it is fixed",
        )

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)

"""`create_app`: the API, its events and the inbox as one ASGI app, mountable anywhere."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from starlette.staticfiles import StaticFiles

from .._errors import InvalidArgumentError, UserError
from ..stores import RuntimeStore
from ..temporal._flow import AgentSessionFlow
from ._api import api_router
from ._auth import CSRF_HEADER, FORM_FIELDS, Auth
from ._errors import (
    LOGIN_BODY_BYTES,
    MAX_BODY_BYTES,
    BodyLimit,
    install_error_handlers,
)
from ._feed import Feeds, StreamSlots
from ._pages import install_page_handlers, page_router, templates
from ._service import ClientSource, Service, WebOptions
from ._tokens import TokenSet, load_tokens

_log = logging.getLogger(__name__)


def create_app(
    client: ClientSource,
    flows: Sequence[AgentSessionFlow] = (),
    store: RuntimeStore | None = None,
    *,
    tokens: str | Path | TokenSet | None = None,
    allow_anonymous_loopback: bool = False,
    cors_origins: Sequence[str] = (),
    worker_timeout: float = 10.0,
    wait_timeout: float = 300.0,
    poll_interval: float = 0.02,
    pages: bool = True,
    max_streams: int = 1000,
    max_streams_per_caller: int = 250,
) -> FastAPI:
    """The web app of the sessions that `client` and `store` reach.

    Args:
        client: A connected Temporal client (with `SessionPlugin` or
            `EmbeddedEngine.client()`), or an async function that connects one,
            called on first use in the server's event loop.
        flows: The flows `POST /api/sessions` may start (the other endpoints
            serve every session the store knows).
        store: The runtime store the sessions' workers write.
        tokens: Who may call: the path of a token file (TOML or JSON, the
            entries `dex-agents serve --new-token` prints); None reads
            `DEX_AGENTS_WEB_TOKENS` (the file's text). No token at all is
            refused unless `allow_anonymous_loopback`.
        allow_anonymous_loopback: Let requests from 127.0.0.1/::1 without a
            token act as admin: for `dev` only, never behind a proxy.
        cors_origins: Origins a browser front end may call the API from
            (bearer tokens; no cookies), each `scheme://host[:port]` as the
            browser sends it in `Origin`, or `*` for any (not with
            `allow_anonymous_loopback`). Off by default. With
            `allow_anonymous_loopback`, a request with an `Origin` gets in
            without a token only from the app's own origin or a listed one.
        worker_timeout: Seconds a request waits for a worker to take it (then
            503 `no_worker`).
        wait_timeout: Seconds `POST .../messages` with `wait: true` waits for
            the turn (then 504 `timeout`).
        poll_interval: Seconds between two reads of the event log by a followed
            session's poller.
        pages: Serve the inbox pages (`/inbox`, `/sessions`, `/login`).
        max_streams: Event streams the app keeps open at once; past it a new
            one is 429 `too_many_streams`.
        max_streams_per_caller: Event streams one token (or the anonymous
            loopback caller) keeps open at once; past it, 429 too.

    Mount it in your own app with `app.mount("/agents", create_app(...))`.

    Raises:
        UserError: no store, a tokens file that cannot be read or parsed, or
            no token and no anonymous loopback.
        InvalidArgumentError: a timeout or the poll interval is not a positive
            number of seconds, a stream cap is not a positive whole number, a CORS origin is not an origin, or `*` is
            among them with `allow_anonymous_loopback`.
    """
    origins = _cors_origins(cors_origins)
    if "*" in origins and allow_anonymous_loopback:
        raise InvalidArgumentError("cors_origins", ANY_ORIGIN_WITH_ANONYMOUS)
    slots = StreamSlots(
        per_caller=_count("max_streams_per_caller", max_streams_per_caller),
        total=_count("max_streams", max_streams),
    )
    settings = WebOptions(
        worker_timeout=_seconds("worker_timeout", worker_timeout),
        wait_timeout=_seconds("wait_timeout", wait_timeout),
        poll_interval=_seconds("poll_interval", poll_interval),
    )
    if store is None:
        raise UserError(
            "create_app needs the runtime store the sessions' workers write: "
            "pass `store=` (for example `SQLiteRuntimeStore(path)`)"
        )
    token_set = (
        tokens if isinstance(tokens, TokenSet) else load_tokens(tokens, env=os.environ)
    )
    if not len(token_set) and not allow_anonymous_loopback:
        raise UserError(
            "the web app has no tokens, so it would refuse every request; pass "
            "`tokens=` the path of a tokens file, set `DEX_AGENTS_WEB_TOKENS`, or (for "
            "`dev` on this machine only) `allow_anonymous_loopback=True`"
        )
    service = Service(client, flows, store, settings)
    auth = Auth(
        tokens=token_set,
        allow_anonymous_loopback=allow_anonymous_loopback,
        trusted_origins=origins,
    )
    feeds = Feeds(store, poll_interval=settings.poll_interval)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncGenerator[None, None]:
        yield
        await feeds.close()  # run alone; a mounted app's feeds end with their followers

    app = FastAPI(
        title="dex-agents",
        summary="Durable agent sessions: messages, approvals and live events.",
        version="1",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        # No route takes a file: a multipart file part is refused, not spooled.
        form_limits={"max_files": 0, "max_fields": FORM_FIELDS},
    )
    install_error_handlers(app)
    # Bodies are read before the token is checked: bound them for everyone.
    # Inside CORS (added below), so a front end elsewhere can read the 413.
    app.add_middleware(
        BodyLimit, limits={"/login": LOGIN_BODY_BYTES}, default=MAX_BODY_BYTES
    )
    app.include_router(api_router(service, auth, feeds, slots))
    if pages:
        env = templates()
        install_page_handlers(app, env)
        app.include_router(page_router(service, auth, env))
        app.mount(
            "/static",
            StaticFiles(packages=[("dex_agents.web", "static")]),
            name="static",
        )
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["GET", "POST"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "Last-Event-ID",
                CSRF_HEADER,
            ],
        )
    _with_bearer_scheme(app)
    app.state.dex_service = service
    return app


def _with_bearer_scheme(app: FastAPI) -> None:
    """Say in the OpenAPI schema that every operation takes a bearer token."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
            )
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}
            }
            schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


ANY_ORIGIN_WITH_ANONYMOUS = (
    "`cors_origins=['*']` with `allow_anonymous_loopback=True` would let any "
    "website open in this machine's browser read every session as admin; list "
    "the front end's own origins instead of '*' (such as "
    "`cors_origins=['http://127.0.0.1:9100']`), or use tokens without "
    "`allow_anonymous_loopback`"
)
"""Why `create_app` refuses `*` with anonymous loopback access (`serve` says it its way)."""

_ORIGIN_RULE = (
    "an origin is `scheme://host[:port]` as a browser sends it in its `Origin` "
    "header, lowercase, with no path and no trailing slash (such as "
    "`https://desk.example.com` or `http://127.0.0.1:9100`), or `*` for any origin"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def cors_origin_problem(value: str) -> str | None:
    """Why `value` cannot be a CORS origin, with the origin it likely means; None if it can.

    The CORS middleware compares the browser's `Origin` header with each
    origin as text, so `http://127.0.0.1:9100/` or `127.0.0.1:9100` would never
    match and every preflight would fail with a plain-text 400: refused here,
    when the app is made, instead. `dex-agents serve --cors-origin` asks it too.
    """
    if value == "*":
        return None
    if value == "null":
        return (
            "'null' is the origin of sandboxed frames and local files, which any "
            f"site can make, so it cannot be trusted; {_ORIGIN_RULE}"
        )
    meant = _origin_meant(value)
    if meant == value:
        return None
    hint = f"; pass {meant!r}" if meant is not None else ""
    return f"{value!r} is not an origin: {_ORIGIN_RULE}{hint}"


def _origin_meant(value: str) -> str | None:
    """The origin `value` names, as a browser writes it (None when it names none)."""
    text = value.strip()
    if "://" not in text:
        text = f"http://{text}"  # `127.0.0.1:9100`: a local page, most likely
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if not parts.scheme or not host or any(c.isspace() for c in host):
        return None
    scheme = parts.scheme.lower()
    shown = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        shown = f"{shown}:{port}"
    return f"{scheme}://{shown}"


def _cors_origins(values: Sequence[str]) -> tuple[str, ...]:
    """`values` if each is an origin (`cors_origin_problem`); else the error that says so."""
    if isinstance(values, str):
        raise InvalidArgumentError(
            "cors_origins",
            f"`cors_origins=` takes a list of origins, not one string: pass "
            f"[{values!r}]",
        )
    for value in values:
        problem = (
            cors_origin_problem(value)
            if isinstance(value, str)  # pyright: ignore[reportUnnecessaryIsInstance]
            else f"{value!r} is not a string; {_ORIGIN_RULE}"
        )
        if problem is not None:
            raise InvalidArgumentError(
                "cors_origins", f"bad entry of `cors_origins=`: {problem}"
            )
    return tuple(values)


def _seconds(name: str, value: object) -> float:
    """`value` if it is a positive number of seconds; else the error that says so."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or value <= 0
    ):
        raise InvalidArgumentError(
            name, f"`{name}=` must be a positive number of seconds, not {value!r}"
        )
    return float(value)


def _count(name: str, value: object) -> int:
    """`value` if it is a positive whole number; else the error that says so."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(
            name, f"`{name}=` must be a positive whole number, not {value!r}"
        )
    return value

"""`create_app`: the API, its events and the inbox as one ASGI app, mountable anywhere."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from starlette.staticfiles import StaticFiles

from .._errors import InvalidArgumentError, UserError
from ..stores import RuntimeStore
from ..temporal._flow import AgentSessionFlow
from ._api import api_router
from ._auth import CSRF_HEADER, Auth
from ._errors import install_error_handlers
from ._feed import Feeds
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
            (bearer tokens; no cookies). Off by default.
        worker_timeout: Seconds a request waits for a worker to take it (then
            503 `no_worker`).
        wait_timeout: Seconds `POST .../messages` with `wait: true` waits for
            the turn (then 504 `timeout`).
        poll_interval: Seconds between two reads of the event log by a followed
            session's poller.
        pages: Serve the inbox pages (`/inbox`, `/sessions`, `/login`).

    Mount it in your own app with `app.mount("/agents", create_app(...))`.

    Raises:
        UserError: no store, a tokens file that cannot be read or parsed, or
            no token and no anonymous loopback.
        InvalidArgumentError: a timeout or the poll interval is not a positive
            number of seconds.
    """
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
        trusted_origins=tuple(cors_origins),
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
    )
    install_error_handlers(app)
    app.include_router(api_router(service, auth, feeds))
    if pages:
        env = templates()
        install_page_handlers(app, env)
        app.include_router(page_router(service, auth, env))
        app.mount(
            "/static",
            StaticFiles(packages=[("dex_agents.web", "static")]),
            name="static",
        )
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
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

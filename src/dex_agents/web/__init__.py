"""Sessions on the web: an HTTP + SSE API with tokens and roles, and an approval inbox.

`create_app(client, flows, store, tokens=...)` is an ASGI application (FastAPI)
that any FastAPI or Starlette app can mount; `dex-agents serve` runs it alone.
Needs the `web` extra: `pip install "dex-agents[web]"`. See `docs/web.md`.
"""

try:
    import ag_ui  # noqa: F401
    import fastapi  # noqa: F401
    import jinja2  # noqa: F401
    import sse_starlette  # noqa: F401
except ImportError as e:  # pragma: no cover - the guard only fires without the extra
    raise ImportError(
        '`dex_agents.web` needs the `web` extra: pip install "dex-agents[web]"'
    ) from e

from ._app import create_app
from ._server import RunningServer, serving
from ._service import WebOptions
from ._tokens import (
    ROLES,
    Principal,
    Role,
    Token,
    TokenSet,
    hash_token,
    load_tokens,
    new_token,
    token_entry,
)

__all__ = [
    "Principal",
    "ROLES",
    "Role",
    "RunningServer",
    "Token",
    "TokenSet",
    "WebOptions",
    "create_app",
    "hash_token",
    "load_tokens",
    "new_token",
    "serving",
    "token_entry",
]

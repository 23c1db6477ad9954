"""Sessions on the web: an HTTP + SSE API with tokens and roles, and an approval inbox.

`create_app(client, flows, store, tokens=...)` is an ASGI application (FastAPI)
that any FastAPI or Starlette app can mount; `dex-agents serve` runs it alone.
Needs the `web` extra: `pip install "dex-agents[web]"`. See `docs/web.md`.
"""

try:
    # Imported only to fail here, with the fix, when the extra is missing.
    import ag_ui  # noqa: F401  # pyright: ignore[reportUnusedImport]
    import fastapi  # noqa: F401  # pyright: ignore[reportUnusedImport]
    import jinja2  # noqa: F401  # pyright: ignore[reportUnusedImport]
    import sse_starlette  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as e:  # pragma: no cover - the guard only fires without the extra
    raise ImportError(
        '`dex_agents.web` needs the `web` extra: pip install "dex-agents[web]"'
    ) from e

from ._app import create_app

__all__ = ["create_app"]

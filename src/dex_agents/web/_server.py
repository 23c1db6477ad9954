"""Running the app on uvicorn inside an event loop that is already running.

`dex-agents serve` runs it alone; `dex-agents dev` (and tests) run it next to
a worker in the same loop, where the Temporal client lives: `serving(app)`
starts uvicorn as a task, waits until it listens (port 0 picks a free one),
and stops it on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any

import uvicorn

_START_LIMIT = 30.0
_STOP_LIMIT = 10.0


class _QuietServer(uvicorn.Server):
    """A server that leaves the process's signals to its owner (`dev`, a test)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Install nothing: Ctrl-C belongs to the program that runs the server."""
        yield


@dataclass(frozen=True, kw_only=True, slots=True)
class RunningServer:
    """A listening server and where it listens."""

    url: str
    """`http://host:port` (no trailing slash)."""
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def wait(self) -> None:
        """Return when the server stops (a signal, or `server.should_exit`)."""
        await asyncio.shield(self.task)


@contextlib.asynccontextmanager
async def serving(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    handle_signals: bool = False,
    **config: Any,
) -> AsyncGenerator[RunningServer, None]:
    """Serve `app` with uvicorn in this loop until the block ends.

    `handle_signals`: let uvicorn catch SIGINT/SIGTERM, stop gracefully and
    raise them again (`dex-agents serve`); otherwise the caller owns them.
    Extra keyword arguments go to `uvicorn.Config` (for example `root_path`,
    `proxy_headers`, `log_level`).

    Raises:
        RuntimeError: the server did not start listening within 30 s (the
            port is taken, or the app's startup failed).
    """
    config.setdefault("log_level", "warning")
    # Event streams never end by themselves: cut them this long after a stop.
    config.setdefault("timeout_graceful_shutdown", 3)
    kind = uvicorn.Server if handle_signals else _QuietServer
    server = kind(uvicorn.Config(app, host=host, port=port, **config))
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(_START_LIMIT):
            while not server.started:
                if task.done():
                    break
                await asyncio.sleep(0.01)
        if not server.started:
            await task  # raises the startup error, if it raised one
            raise RuntimeError(
                f"the web server did not start on {host}:{port}; is the port taken?"
            )
        sockets = [s for srv in server.servers for s in srv.sockets]
        bound = sockets[0].getsockname()[1] if sockets else port
        shown = f"[{host}]" if ":" in host else host
        yield RunningServer(url=f"http://{shown}:{bound}", server=server, task=task)
    finally:
        server.should_exit = True  # finish open requests; streams end at once
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_STOP_LIMIT):
                await asyncio.shield(task)
        if not task.done():
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

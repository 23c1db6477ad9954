"""An HTTP(S) proxy that refuses everything and remembers who asked.

Hermetic tests point `HTTPS_PROXY` and `HTTP_PROXY` at it. Anything that tries
to leave the machine (telemetry, update checks, a real API call) then fails
fast with 403 instead of reaching the internet, and `attempts` shows what it
was. CLI 2.1.327 sends even loopback `http://` API calls through `HTTPS_PROXY`
unless `NO_PROXY` covers them, so an attempt here can also mean a broken
`NO_PROXY`. It serves from a daemon thread so a blocked test loop cannot stall
the client being refused.
"""

from __future__ import annotations

import socket
import socketserver
import threading

from .._scripted._background import StartClose

_REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class RefusingProxy(StartClose):
    """Answers every request with 403 and records its request line.

    Use it as `async with RefusingProxy() as proxy:` (or `with`); after the run,
    `proxy.attempts` should be empty, e.g. `["CONNECT api.anthropic.com:443 HTTP/1.1"]`
    when something tried to go out.
    """

    __test__ = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: list[str] = []
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port; only known once the proxy started."""
        if self._server is None:
            raise RuntimeError("RefusingProxy is not started; use `async with`")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The URL to use as `HTTPS_PROXY` / `HTTP_PROXY`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def attempts(self) -> list[str]:
        """Request lines received, in arrival order (a copy)."""
        with self._lock:
            return list(self._attempts)

    def start(self) -> None:
        """Bind to a free loopback port and serve from a daemon thread."""
        if self._server is not None:
            return
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = 10

            def handle(self) -> None:
                try:
                    line = self.rfile.readline(65536)
                except (OSError, TimeoutError):
                    line = b""
                with proxy._lock:
                    proxy._attempts.append(line.decode("latin-1").strip())
                try:
                    self.wfile.write(_REFUSAL)
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="RefusingProxy",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop listening and join the serving thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        self._server = self._thread = None

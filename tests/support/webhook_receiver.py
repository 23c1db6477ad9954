"""A real HTTP receiver on 127.0.0.1 for webhook tests (a uniquely named module)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A real HTTP server that records every POST and can fail or hang on demand."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    failures_left: int = 0
    hang: bool = False
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            # Recorded before answering: when the notifier returns, it is here.
            state.requests.append(Received(dict(self.headers.items()), body))
            if state.hang:
                state.release.wait(5)
            failing = state.failures_left > 0
            state.failures_left -= failing
            self.send_response(500 if failing else 204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/approvals"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)

"""A scripted Anthropic Messages API on a real loopback HTTP server.

The real Claude Code CLI talks to it through `ANTHROPIC_BASE_URL`, so the
real-CLI suite exercises the CLI's own HTTP client, SSE parser and retry logic
without a model. The server runs its own event loop in a daemon thread: the CLI
is a separate process that keeps calling while the test's loop is busy (or
blocked), and gates must be answerable from any thread.

It is a deliberately small HTTP/1.1 server: `Content-Length` or chunked request
bodies, keep-alive, and chunked Server-Sent Events responses shaped like the
Messages API's streaming format. Answers come from `plan_reply`. With
`max_request_bytes` set it refuses a larger body as the real API does (HTTP 413,
`request_too_large`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import JsonValue

from ._background import StartClose
from ._script import PlannedReply, ScriptError, TextReply, ToolUseReply, plan_reply

_INPUT_TOKENS = 20
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Not Allowed",
    413: "Payload Too Large",
}

REQUEST_TOO_LARGE_BODY: dict[str, JsonValue] = {
    "type": "error",
    "error": {
        "type": "request_too_large",
        "message": "Request exceeds the maximum allowed number of bytes.",
    },
}
"""What the real Messages API answers, with HTTP 413, to a body over its limit."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedRequest:
    """One HTTP request the mock received, as it arrived."""

    method: str
    path: str
    """The request target, query included (e.g. `/v1/messages?beta=true`)."""
    headers: dict[str, str]
    """Header names lower-cased; a repeated header keeps its last value."""
    body: JsonValue
    """The parsed JSON body, or None when it was empty, not JSON, or too large."""
    size: int = 0
    """Bytes of the body as received (after any chunked framing)."""


class _Gate:
    """A named gate: requests wait until the test opens it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()


class MockMessagesApi(StartClose):
    """Scripted `POST /v1/messages` on `127.0.0.1:<free port>`.

    Use it as `async with MockMessagesApi() as api:` (or `with`), point the CLI's
    `ANTHROPIC_BASE_URL` at `api.base_url`, and after the run check `api.requests`
    and that `api.unserved` is empty. A script's `;; pause <gate>` holds the answer
    until `open_gate(gate)`; `await api.wait_paused(gate)` returns once a request
    waits there. Requests refused for `max_request_bytes` are in `too_large`, not
    in `unserved`: the test asked for them.
    """

    __test__ = False

    def __init__(
        self,
        *,
        unscripted_reply: str | None = None,
        max_request_bytes: int | None = None,
    ) -> None:
        """Create the server (started by `async with` / `with`).

        Args:
            unscripted_reply: Text to answer a prompt that holds no `dex-script:`
                command with (for interactive use: a "thanks!" after a scripted
                turn gets this text, never that turn's tool calls again). None
                answers such a request with a 400 and records it in `unserved`,
                which tests rely on.
            max_request_bytes: The largest request body served; see the
                `max_request_bytes` property. None serves any size.
        """
        self._unscripted_reply = unscripted_reply
        self._max_request_bytes = max_request_bytes
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._unserved: list[RecordedRequest] = []
        self._too_large: list[RecordedRequest] = []
        self._message_count = 0
        self._gates: dict[str, _Gate] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    @property
    def base_url(self) -> str:
        """The URL to hand the CLI as `ANTHROPIC_BASE_URL`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        """The bound port; only known once the server started."""
        if self._port is None:
            raise RuntimeError("MockMessagesApi is not started; use `async with`")
        return self._port

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def unserved(self) -> list[RecordedRequest]:
        """Requests not answered with 200: unknown paths, bad bodies, bad scripts.

        Bodies refused for `max_request_bytes` are not here but in `too_large`.
        """
        with self._lock:
            return list(self._unserved)

    @property
    def too_large(self) -> list[RecordedRequest]:
        """Requests refused with 413 because the body exceeded `max_request_bytes`."""
        with self._lock:
            return list(self._too_large)

    @property
    def max_request_bytes(self) -> int | None:
        """The largest request body (bytes) served; None serves any size.

        A larger body is read whole, then answered as the real Messages API
        does: HTTP 413 with `REQUEST_TOO_LARGE_BODY`. Settable at any time,
        also while the server runs; the next request sees the new value.
        """
        with self._lock:
            return self._max_request_bytes

    @max_request_bytes.setter
    def max_request_bytes(self, value: int | None) -> None:
        if value is not None and value < 0:
            raise ValueError("max_request_bytes must be None or at least 0")
        with self._lock:
            self._max_request_bytes = value

    def start(self) -> None:
        """Bind and serve from a daemon thread; returns once the port is known."""
        if self._thread is not None:
            return
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                server = loop.run_until_complete(
                    asyncio.start_server(self._serve_connection, "127.0.0.1", 0)
                )
            except BaseException as e:  # surfaced to start() below
                failure.append(e)
                ready.set()
                loop.close()
                return
            self._port = server.sockets[0].getsockname()[1]
            ready.set()
            try:
                loop.run_forever()
            finally:
                server.close()
                # Requests still waiting at a gate would otherwise die pending.
                loop.run_until_complete(_cancel_all())
                loop.run_until_complete(server.wait_closed())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="MockMessagesApi", daemon=True)
        self._thread.start()
        ready.wait(timeout=10)
        if failure:
            raise failure[0]

    def close(self) -> None:
        """Stop serving and join the server thread (open connections are cut)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None

    def open_gate(self, name: str) -> None:
        """Let every request waiting at `name`, now or later, answer."""
        self._call_in_loop(lambda: self._gate(name).opened.set())

    async def wait_paused(self, name: str, *, timeout: float = 30) -> None:
        """Return once a request has reached gate `name`.

        Raises:
            TimeoutError: No request reached the gate within `timeout` seconds.
        """
        loop = self._require_loop()

        async def reached() -> None:
            await self._gate(name).reached.wait()

        future = asyncio.run_coroutine_threadsafe(reached(), loop)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wrap_future(future)
        except TimeoutError:
            future.cancel()
            raise

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._thread is None:
            raise RuntimeError("MockMessagesApi is not started; use `async with`")
        return self._loop

    def _call_in_loop(self, action: Callable[[], object]) -> None:
        self._require_loop().call_soon_threadsafe(action)

    def _gate(self, name: str) -> _Gate:
        # Only touched from the server loop, so gates need no lock.
        return self._gates.setdefault(name, _Gate())

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while await self._serve_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        except asyncio.CancelledError:
            # `close` cancels the connections still open (a CLI exiting in the
            # background keeps one). Ending normally here, not cancelled, is what
            # keeps Python 3.11's stream callback from printing a traceback
            # (`task.exception()` raises on a cancelled task there).
            pass
        finally:
            writer.close()

    async def _serve_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Serve one request; False once the connection should close."""
        line = await reader.readline()
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        raw = await _read_body(reader, headers)
        keep_alive = headers.get("connection", "").lower() != "close"
        limit = self.max_request_bytes
        if limit is not None and len(raw) > limit:
            request = RecordedRequest(
                method=method, path=target, headers=headers, body=None, size=len(raw)
            )
            with self._lock:
                self._requests.append(request)
                self._too_large.append(request)
            await _write_json(writer, 413, REQUEST_TOO_LARGE_BODY)
            return keep_alive
        try:
            body: JsonValue = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        request = RecordedRequest(
            method=method, path=target, headers=headers, body=body, size=len(raw)
        )
        with self._lock:
            self._requests.append(request)
        path = target.split("?", 1)[0]
        if path != "/v1/messages":
            await self._refuse(writer, request, 404, "not_found_error", path)
            return keep_alive
        if method != "POST":
            await self._refuse(writer, request, 405, "invalid_request_error", method)
            return keep_alive
        if not isinstance(body, dict):
            await self._refuse(writer, request, 400, "invalid_request_error", "body")
            return keep_alive
        messages = body.get("messages")
        tools = body.get("tools")
        names = [
            str(t.get("name"))
            for t in (tools if isinstance(tools, list) else [])
            if isinstance(t, dict)
        ]
        try:
            planned = plan_reply(
                messages if isinstance(messages, list) else [], tool_names=names
            )
        except ScriptError as e:
            if self._unscripted_reply is None:
                await self._refuse(
                    writer, request, 400, "invalid_request_error", str(e)
                )
                return keep_alive
            planned = PlannedReply(reply=TextReply(text=self._unscripted_reply))
        if planned.pause is not None:
            gate = self._gate(planned.pause)
            gate.reached.set()
            await gate.opened.wait()
        message = self._message(planned, model=str(body.get("model", "mock-model")))
        if body.get("stream") is True:
            await _write_head(writer, 200, "text/event-stream", chunked=True)
            for event in _stream_events(message):
                writer.write(_chunk(event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        else:
            await _write_json(writer, 200, message)
        await writer.drain()
        return keep_alive

    async def _refuse(
        self,
        writer: asyncio.StreamWriter,
        request: RecordedRequest,
        status: int,
        error_type: str,
        detail: str,
    ) -> None:
        with self._lock:
            self._unserved.append(request)
        message = f"mock Messages API cannot serve {request.method} {request.path}"
        error: JsonValue = {"type": error_type, "message": f"{message}: {detail}"}
        await _write_json(writer, status, {"type": "error", "error": error})

    def _message(self, planned: PlannedReply, *, model: str) -> dict[str, JsonValue]:
        with self._lock:
            self._message_count += 1
            number = self._message_count
        content: list[JsonValue] = []
        match planned.reply:
            case TextReply(text=text):
                content.append({"type": "text", "text": text})
                stop_reason, produced = "end_turn", text
            case ToolUseReply(calls=calls):
                for call in calls:
                    use_id = f"toolu_mock_{secrets.token_hex(8)}"
                    block: dict[str, JsonValue] = {"type": "tool_use", "id": use_id}
                    block |= {"name": call.name, "input": call.input}
                    content.append(block)
                stop_reason, produced = "tool_use", json.dumps(content)
        return {
            "id": f"msg_mock_{number:04d}_{secrets.token_hex(6)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": _usage(max(1, len(produced) // 4)),
        }


def _usage(output_tokens: int) -> dict[str, JsonValue]:
    return {
        "input_tokens": _INPUT_TOKENS,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }


def _stream_events(message: dict[str, JsonValue]) -> list[str]:
    """The SSE events that stream `message`, as the Messages API sends them."""
    content, usage = message["content"], message["usage"]
    assert isinstance(content, list) and isinstance(usage, dict)
    start = message | {"content": [], "stop_reason": None}
    start["usage"] = usage | {"output_tokens": 1}
    events = [_event("message_start", message=start), _event("ping")]
    for index, block in enumerate(content):
        assert isinstance(block, dict)
        if block["type"] == "text":
            opening: JsonValue = {"type": "text", "text": ""}
            kind, key, raw = "text_delta", "text", str(block["text"])
        else:
            opening = {**block, "input": {}}
            kind, key, raw = (
                "input_json_delta",
                "partial_json",
                json.dumps(block["input"]),
            )
        middle = len(raw) // 2
        events.append(_event("content_block_start", index=index, content_block=opening))
        events.extend(
            _event("content_block_delta", index=index, delta={"type": kind, key: piece})
            for piece in (raw[:middle], raw[middle:])
            if piece
        )
        events.append(_event("content_block_stop", index=index))
    stop: JsonValue = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    output: JsonValue = {"output_tokens": usage["output_tokens"]}
    events.append(_event("message_delta", delta=stop, usage=output))
    events.append(_event("message_stop"))
    return events


def _event(name: str, **fields: JsonValue) -> str:
    data: dict[str, JsonValue] = {"type": name}
    data |= fields
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while size := int((await reader.readline()).split(b";")[0].strip(), 16):
            body += await reader.readexactly(size)
            await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return bytes(body)
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


async def _write_head(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    *,
    chunked: bool = False,
    length: int = 0,
) -> None:
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"{framing}\r\n"
        "Cache-Control: no-cache\r\n"
        f"request-id: req_mock_{secrets.token_hex(8)}\r\n"
        "\r\n"
    )
    writer.write(head.encode("latin-1"))
    await writer.drain()


async def _write_json(
    writer: asyncio.StreamWriter, status: int, payload: JsonValue
) -> None:
    data = json.dumps(payload).encode()
    await _write_head(writer, status, "application/json", length=len(data))
    writer.write(data)
    await writer.drain()


def _chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"

"""The fake Claude CLI's side of the SDK's stream-json control protocol.

Stdout carries NDJSON frames to the SDK; stdin carries the SDK's user messages,
its control requests (`initialize` first) and its answers to the CLI's own
control requests (`hook_callback`, `can_use_tool`, `mcp_message`), matched by
`request_id`. The SDK serves every CLI request concurrently, so several may be
in flight. Once stdin closes nothing can answer any more: every pending and
later request fails with `WireClosed`, which is how CLI 2.1.327 loses an SDK MCP
server when the host closes stdin early (reference d7).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import cast

from pydantic import JsonValue

from ._fake_cli_args import JsonObject

ControlHandler = Callable[[str, JsonObject], Awaitable[JsonObject]]
"""Answers one SDK control request by subtype; raising sends an error response."""

_LINE_LIMIT = 64 * 1024 * 1024


class WireClosed(Exception):
    """Stdin closed, so the SDK can no longer answer a control request."""


class ControlError(Exception):
    """The SDK answered a control request with `subtype: "error"`."""


class Wire:
    """Frames out, user messages and control traffic in."""

    def __init__(self, handle_control: ControlHandler) -> None:
        self._handle_control = handle_control
        self._pending: dict[str, asyncio.Future[JsonObject]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.messages: asyncio.Queue[JsonObject | None] = asyncio.Queue()
        """User messages in arrival order; None once stdin closed."""
        self.closed = asyncio.Event()

    def send(self, frame: JsonObject) -> None:
        """Write one frame; stdout is flushed so the SDK sees it at once."""
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        try:
            sys.stdout.buffer.write(line.encode() + b"\n")
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            # The host is gone (killed mid-turn); nothing can be reported.
            os._exit(1)

    async def request(self, request: JsonObject) -> JsonObject:
        """Send a control request and wait for the SDK's answer.

        Raises:
            WireClosed: Stdin is (or becomes) closed before the answer.
            ControlError: The SDK answered with an error, e.g. its hook raised.
        """
        if self.closed.is_set():
            raise WireClosed(f"stdin closed before {request.get('subtype')!r}")
        request_id = str(uuid.uuid4())
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self.send(
            {"type": "control_request", "request_id": request_id, "request": request}
        )
        try:
            return await future
        finally:
            self._pending.pop(request_id, None)

    async def read_loop(self) -> None:
        """Read stdin until it closes, routing every frame."""
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
        )
        try:
            while line := await reader.readline():
                self._route(line)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(WireClosed("stdin closed"))
            self.messages.put_nowait(None)

    def _route(self, line: bytes) -> None:
        try:
            frame: JsonValue = json.loads(line)
        except json.JSONDecodeError:
            return
        if not isinstance(frame, dict):
            return
        match frame.get("type"):
            case "user":
                self.messages.put_nowait(frame)
            case "control_request":
                task = asyncio.create_task(self._answer(frame))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            case "control_response":
                self._resolve(frame.get("response"))
            case _:
                pass

    def _resolve(self, response: JsonValue) -> None:
        if not isinstance(response, dict):
            return
        future = self._pending.get(str(response.get("request_id")))
        if future is None or future.done():
            return
        if response.get("subtype") == "error":
            future.set_exception(ControlError(str(response.get("error"))))
        else:
            body = response.get("response")
            future.set_result(cast(JsonObject, body) if isinstance(body, dict) else {})

    async def _answer(self, frame: JsonObject) -> None:
        request_id = frame.get("request_id")
        request = frame.get("request")
        body = cast(JsonObject, request) if isinstance(request, dict) else {}
        response: JsonObject
        try:
            answer = await self._handle_control(str(body.get("subtype")), body)
            response = {
                "subtype": "success",
                "request_id": request_id,
                "response": answer,
            }
        except Exception as e:
            response = {"subtype": "error", "request_id": request_id, "error": str(e)}
        self.send({"type": "control_response", "response": response})

"""MCP servers as the fake Claude CLI reaches them.

An SDK server (`{"type": "sdk"}` in `--mcp-config`, which the Python SDK writes
for every in-process server) is spoken to through `mcp_message` control
requests; an HTTP server (`{"type": "http", "url": ...}`) through JSON-RPC over
POST, answered as JSON or as Server-Sent Events. Like CLI 2.1.327 the fake
connects every server at start-up (`initialize`, `notifications/initialized`,
`tools/list`), offers its tools as `mcp__<server>__<tool>`, and puts the tool
use ID into every `tools/call` as `_meta["claudecode/toolUseId"]`. Servers that
only the initialize request names (`sdkMcpServers`, as the TypeScript SDK sends
them) connect later, so a resumed deferred call cannot use them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.request
from dataclasses import dataclass, field
from typing import Literal, cast

from pydantic import JsonValue

from ._fake_cli_args import JsonObject
from ._fake_cli_usage import CLI_VERSION
from ._fake_cli_wire import Wire

_PROTOCOL_VERSION = "2025-11-25"


class McpCallError(Exception):
    """A server could not be reached or answered with a JSON-RPC error."""


@dataclass(kw_only=True, slots=True)
class McpServer:
    """One configured server and what its handshake returned."""

    name: str
    config: JsonObject
    declared: bool
    """Named in `--mcp-config`, so present before any resumed call runs."""
    status: Literal["pending", "connected", "failed"] = "pending"
    tools: list[JsonObject] = field(default_factory=lambda: [])
    ids: itertools.count[int] = field(default_factory=itertools.count)
    """JSON-RPC request IDs, from 0 as CLI 2.1.327 numbers them."""
    http_session: str | None = None
    """The `Mcp-Session-Id` an HTTP server assigned."""

    @property
    def kind(self) -> str:
        """`sdk`, `http`, or whatever else the config says (unsupported)."""
        return str(self.config.get("type", "stdio"))


class McpServers:
    """Every server of one CLI process."""

    def __init__(self, wire: Wire, configs: dict[str, JsonObject]) -> None:
        self._wire = wire
        self.servers = {
            name: McpServer(name=name, config=config, declared=True)
            for name, config in configs.items()
        }

    async def connect(self, names: list[str] | None = None) -> None:
        """Connect the named servers (default: all) concurrently."""
        chosen = [self.servers[n] for n in names or list(self.servers)]
        await asyncio.gather(*(self._connect(s) for s in chosen))

    def add_sdk_servers(self, names: list[str]) -> list[str]:
        """Register servers the initialize request named; returns the new ones."""
        added = [n for n in names if n not in self.servers]
        for name in added:
            config: JsonObject = {"type": "sdk", "name": name}
            self.servers[name] = McpServer(name=name, config=config, declared=False)
        return added

    async def _connect(self, server: McpServer) -> None:
        try:
            await self._request(
                server,
                "initialize",
                {
                    "protocolVersion": _PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": CLI_VERSION},
                },
            )
            await self._notify(server, "notifications/initialized")
            listed = await self._request(server, "tools/list", None)
            tools = listed.get("tools")
            server.tools = (
                [cast(JsonObject, t) for t in tools or [] if isinstance(t, dict)]
                if isinstance(tools, list)
                else []
            )
            server.status = "connected"
        except (McpCallError, OSError):
            # CLI 2.1.327 reports such a server as failed and goes on without it.
            server.status = "failed"
            server.tools = []

    def tool_names(self) -> list[str]:
        """The connected servers' tools as the model sees them."""
        return [
            f"mcp__{s.name}__{t.get('name')}"
            for s in self.servers.values()
            if s.status == "connected"
            for t in s.tools
        ]

    def status(self) -> list[JsonValue]:
        """The `mcp_servers` of the init message."""
        return [
            {"name": s.name, "status": s.status, "source": s.kind}
            for s in self.servers.values()
        ]

    def find(self, tool_name: str) -> tuple[McpServer, JsonObject] | None:
        """The connected server and tool behind `mcp__<server>__<tool>`."""
        for server in self.servers.values():
            for tool in server.tools if server.status == "connected" else []:
                if tool_name == f"mcp__{server.name}__{tool.get('name')}":
                    return server, tool
        return None

    def server_of(self, tool_name: str) -> McpServer | None:
        """The server a `mcp__<server>__...` name points to, connected or not."""
        for server in self.servers.values():
            if tool_name.startswith(f"mcp__{server.name}__"):
                return server
        return None

    async def call(
        self, server: McpServer, tool: str, arguments: JsonValue, tool_use_id: str
    ) -> JsonObject:
        """Run `tools/call` and return its JSON-RPC result.

        Raises:
            McpCallError: The server is unreachable or answered with an error.
        """
        params: JsonObject = {
            "name": tool,
            "arguments": arguments,
            "_meta": {"claudecode/toolUseId": tool_use_id, "progressToken": 2},
        }
        return await self._request(server, "tools/call", params)

    async def _request(
        self, server: McpServer, method: str, params: JsonObject | None
    ) -> JsonObject:
        message: JsonObject = {
            "method": method,
            "jsonrpc": "2.0",
            "id": next(server.ids),
        }
        if params is not None:
            message["params"] = params
        response = await self._send(server, message)
        if response is None:
            raise McpCallError(f"{server.name}: no answer to {method}")
        error = response.get("error")
        if isinstance(error, dict):
            raise McpCallError(f"MCP error {error.get('code')}: {error.get('message')}")
        result = response.get("result")
        return cast(JsonObject, result) if isinstance(result, dict) else {}

    async def _notify(self, server: McpServer, method: str) -> None:
        await self._send(server, {"jsonrpc": "2.0", "method": method})

    async def _send(self, server: McpServer, message: JsonObject) -> JsonObject | None:
        match server.kind:
            case "sdk":
                try:
                    answer = await self._wire.request(
                        {
                            "subtype": "mcp_message",
                            "server_name": server.name,
                            "message": message,
                        }
                    )
                except Exception as e:
                    raise McpCallError(f"{server.name}: {e}") from e
                response = answer.get("mcp_response")
                return (
                    cast(JsonObject, response) if isinstance(response, dict) else None
                )
            case "http" | "sse":
                return await asyncio.to_thread(_post, server, message)
            case other:
                raise McpCallError(
                    f"{server.name}: the fake CLI cannot run {other!r} servers"
                )


def _post(server: McpServer, message: JsonObject) -> JsonObject | None:
    """One JSON-RPC message over streamable HTTP; blocking, run in a thread."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    configured = server.config.get("headers")
    if isinstance(configured, dict):
        headers |= {k: str(v) for k, v in configured.items()}
    if server.http_session is not None:
        headers["Mcp-Session-Id"] = server.http_session
    request = urllib.request.Request(
        str(server.config.get("url")),
        data=json.dumps(message).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            session = response.headers.get("Mcp-Session-Id")
            content_type = response.headers.get("Content-Type", "")
            body = response.read().decode()
    except OSError as e:
        raise McpCallError(f"{server.name}: {e}") from e
    if session:
        server.http_session = session
    if "id" not in message or not body.strip():
        return None
    payloads = (
        [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
        if "text/event-stream" in content_type
        else [body]
    )
    for payload in payloads:
        try:
            parsed: JsonValue = json.loads(payload)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and parsed.get("id") == message["id"]:
            return parsed
    return None

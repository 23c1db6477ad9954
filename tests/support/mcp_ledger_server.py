"""A tiny real MCP server over a ledger file, for the MCP tool source tests.

Run as `python mcp_ledger_server.py LEDGER stdio` (MCP on stdin and stdout) or
`python mcp_ledger_server.py LEDGER http` (streamable HTTP at `/mcp` on a free
127.0.0.1 port, printed on stdout once the socket listens).

Every tool that runs appends one ledger line with the request's `dex/*` `_meta`
keys and its `Authorization` header (HTTP only), so tests count side effects
and read what the source sent.

A file `LEDGER.hidden`, read when the server starts, names tools (one a line)
the server does not offer, so a test can change what a later listing sees.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import MCPError
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import INVALID_PARAMS, TextContent, ToolAnnotations

# Imported on first use: a stdio server starts once per listing, and the test
# kit's import costs a second that a listing should not pay.
_ledger: Any = None


def _record(kind: str, ctx: Context, **data: object) -> None:
    global _ledger
    if _ledger is None:
        from dex_agents.testing import Ledger

        _ledger = Ledger(sys.argv[1])
    meta = dict(ctx.request_context.meta or {})
    headers = ctx.headers or {}
    _ledger.record(
        kind,
        idempotency_key=meta.get("dex/idempotencyKey"),
        step_execution_id=meta.get("dex/stepExecutionId"),
        attempt=meta.get("dex/attempt"),
        authorization=headers.get("authorization"),
        **data,
    )


server = MCPServer("ledger", log_level="ERROR")


@server.tool(
    description="Read an account's balance",
    annotations=ToolAnnotations(read_only_hint=True),
)
def read_balance(account: str, ctx: Context) -> str:
    _record("mcp_read", ctx, account=account)
    return f"balance of {account}: 0"


@server.tool(
    description="Set an account's limit (setting it twice changes nothing)",
    annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=True),
)
def set_limit(account: str, limit: int, ctx: Context) -> str:
    _record("mcp_set_limit", ctx, account=account, limit=limit)
    return f"limit of {account}: {limit}"


@server.tool(
    description="Append an entry to an account",
    annotations=ToolAnnotations(destructive_hint=False),
)
def append_entry(account: str, amount: int, ctx: Context) -> str:
    _record("mcp_entry", ctx, account=account, amount=amount)
    return f"appended {amount} to {account}"


@server.tool(
    description="Fails with the reason given",
    annotations=ToolAnnotations(read_only_hint=True),
)
def broken(reason: str) -> str:
    raise ToolError(f"broken: {reason}")


@server.tool(
    description="Draws an account's chart",
    annotations=ToolAnnotations(read_only_hint=True),
)
def chart(account: str) -> list[TextContent | Image]:
    return [
        TextContent(type="text", text=f"chart of {account}:"),
        Image(data=b"\x89PNG\r\n\x1a\n", format="png"),
        TextContent(type="text", text="(rising)"),
    ]


@server.tool(description="Appends an entry, then the server dies before answering")
def append_and_crash(account: str, ctx: Context) -> str:
    _record("mcp_entry", ctx, account=account, amount=1)
    os._exit(1)


@server.tool(description="Appends an entry, then answers INVALID_PARAMS anyway")
def append_then_reject(account: str, ctx: Context) -> str:
    _record("mcp_entry", ctx, account=account, amount=1)
    raise MCPError(code=INVALID_PARAMS, message=f"no such account: {account}")


@server.tool(description="Never answers")
async def hang(account: str, ctx: Context) -> str:
    _record("mcp_hang", ctx, account=account)
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def _serve_http() -> None:
    # Listen before printing the port: a client that connects at once waits in
    # the backlog until uvicorn accepts, so the printed port means "ready".
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def _hide_tools() -> None:
    hidden = Path(sys.argv[1] + ".hidden")
    if hidden.exists():
        for name in hidden.read_text().split():
            server.remove_tool(name)


if __name__ == "__main__":
    _hide_tools()
    if sys.argv[2] == "http":
        _serve_http()
    else:
        server.run("stdio")

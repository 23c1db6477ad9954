"""Steps the tool-source suites share: drive a session to idle, approve, rig an MCP agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from dex_agents.connectors import MCPServerToolSource
from dex_agents.session import ToolPolicy
from dex_agents.session._json import JsonValue
from dex_agents.session._records import DeferredToolExecution
from dex_agents.session._state import Interrupt
from dex_agents.session._tool_sources import ToolSourceContext
from dex_agents.temporal import SessionClient
from dex_agents.temporal._snapshot import AgentSnapshot
from dex_agents.testing import Ledger
from support.connector_agent import ConnectorRig
from support.mcp_source_rig import AUTH, http_server, mcp_agent, stdio_server

MCP_CONTEXT = ToolSourceContext(session_id="session-1", turn_id="turn-1", attempt=1)
"""The listing context of the session `support.mcp_source_rig.execution` runs in."""
READ = ToolPolicy(effect="read")
IDEMPOTENT = ToolPolicy(effect="idempotent_write")
WRITE = ToolPolicy(effect="non_idempotent_write")

TRANSFER_A_5 = 'dex-script: call transfer {"account": "a", "amount": 5}'
"""The script of a fake-CLI turn that calls the ledger's `transfer` once."""


async def start_to_idle(
    sessions: SessionClient, sid: str, message: str
) -> AgentSnapshot:
    """Start session `sid` with `message`; its snapshot once no turn runs."""
    await sessions.start(sid, initial_message=message)
    return await sessions.wait_for_idle(sid)


async def start_to_interrupt(
    sessions: SessionClient, sid: str, message: str
) -> tuple[AgentSnapshot, Interrupt]:
    """Start session `sid` with `message`; its idle snapshot and its one pending interrupt."""
    snap = await start_to_idle(sessions, sid, message)
    (interrupt,) = snap.pending_interrupts
    return snap, interrupt


async def resolve_to_idle(
    sessions: SessionClient,
    sid: str,
    interrupt: Interrupt,
    *,
    approved: bool = True,
    rejection_message: str | None = None,
) -> AgentSnapshot:
    """Resolve `interrupt` (the engine must accept it); the snapshot once idle again."""
    assert await sessions.resolve_interrupt(
        sid,
        interrupt.interrupt_id,
        approved=approved,
        rejection_message=rejection_message,
    )
    return await sessions.wait_for_idle(sid)


@asynccontextmanager
async def http_ledger_source(ledger: Ledger) -> AsyncIterator[MCPServerToolSource]:
    """A source on the ledger MCP server over streamable HTTP, up until the block ends."""
    async with http_server(ledger.path) as server:
        yield MCPServerToolSource(server, source_name="ledger", headers=AUTH)


@asynccontextmanager
async def mcp_ledger_agent(
    client: Any,
    flow_type: str,
    tmp_path: Path,
    transport: Literal["http", "stdio"],
) -> AsyncIterator[ConnectorRig]:
    """A session agent whose tools come from the real ledger MCP server.

    Over `http` the server runs (with `AUTH` headers) until the block ends; over
    `stdio` the source starts it per connection. The ledger outlives the block.
    """
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            source = MCPServerToolSource(
                stdio_server(ledger.path), source_name="ledger"
            )
        else:
            source = await stack.enter_async_context(http_ledger_source(ledger))
        sessions = await stack.enter_async_context(
            mcp_agent(client, flow_type, tmp_path, source)
        )
        yield ConnectorRig(sessions=sessions, ledger=ledger)


def deferred_execution(
    attempt: int,
    *,
    idempotency_key: str = "s/turn-1/t1",
    checkpoint: JsonValue | None = None,
    recorded: list[JsonValue] | None = None,
) -> DeferredToolExecution:
    """The tool Step context of call `t1` of turn `turn-1` in session `s`.

    Checkpoints the call records are appended to `recorded` when given.
    """
    return DeferredToolExecution(
        flow_id="s",
        turn_id="turn-1",
        tool_call_id="t1",
        step_execution_id="turn-1/call_tool/t1",
        attempt=attempt,
        idempotency_key=idempotency_key,
        heartbeat_checkpoint=checkpoint,
        checkpoint_recorder=None if recorded is None else recorded.append,
    )

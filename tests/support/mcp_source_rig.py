"""The ledger MCP server (stdio or HTTP) and a Claude agent on the fake CLI that uses it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions

from dex_agents import AgentSessionOptions
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.connectors import (
    MCPServerToolSource,
)
from dex_agents.session import ToolCall, ToolPolicy
from dex_agents.session._records import DeferredToolExecution
from dex_agents.temporal import SessionClient
from support.fake_cli import fake_claude_cli_path
from support.session_harness import in_process_worker

SERVER_SCRIPT = Path(__file__).with_name("mcp_ledger_server.py")
TOKEN = "Bearer test-token"
AUTH = {"Authorization": TOKEN}
"""The headers the HTTP ledger server wants."""


def stdio_server(ledger: Path) -> list[str]:
    """The ledger server's command line: a subprocess per connection."""
    return [sys.executable, str(SERVER_SCRIPT), str(ledger), "stdio"]


@asynccontextmanager
async def http_server(ledger: Path) -> AsyncIterator[str]:
    """The ledger server over streamable HTTP, ready when it yields its URL.

    It wants `headers=AUTH`.
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER_SCRIPT),
        str(ledger),
        "http",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        # The server prints its port once its socket listens.
        async with asyncio.timeout(30):
            line = await proc.stdout.readline()
        assert line.strip().isdigit(), f"server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line)}/mcp"
    finally:
        await asyncio.shield(_stop(proc))


async def _stop(proc: asyncio.subprocess.Process) -> None:
    for escalate in (proc.terminate, proc.kill):
        if proc.returncode is not None:
            return
        escalate()
        with suppress(TimeoutError):
            async with asyncio.timeout(5):
                await proc.wait()


def execution(tool_call_id: str = "call-1", attempt: int = 1) -> DeferredToolExecution:
    """The context a tool Step gives a deferred call."""
    return DeferredToolExecution(
        flow_id="session-1",
        turn_id="turn-1",
        tool_call_id=tool_call_id,
        step_execution_id=f"step-{tool_call_id}",
        attempt=attempt,
        idempotency_key=f"session-1/turn-1/{tool_call_id}",
    )


def tool_call(name: str, arguments: dict[str, Any], policy: ToolPolicy) -> ToolCall:
    """A deferred call as the runner builds it from a source call."""
    return ToolCall(
        tool_call_id="call-1", tool_name=name, arguments=arguments, policy=policy
    )


@asynccontextmanager
async def mcp_agent(
    client: Any, flow_type: str, tmp_path: Path, source: MCPServerToolSource
) -> AsyncIterator[SessionClient]:
    """Serve an agent whose only tools come from `source`, from a worker in this process."""
    cli_path = fake_claude_cli_path()

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        cwd = tmp_path / "sessions" / context.flow_id
        cwd.mkdir(parents=True, exist_ok=True)
        return ClaudeAgentOptions(
            cli_path=cli_path,
            cwd=str(cwd.resolve()),
            tools=["Bash"],
            setting_sources=[],
            env={},
        )

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=options,
            tool_sources=[source],
            # A stdio listing starts a Python server; a loaded machine needs seconds.
            tool_source_listing_timeout=timedelta(seconds=20),
        ),
        flow_type,
        AgentSessionOptions(
            heartbeat_timeout=timedelta(seconds=5),
            retry_interval=timedelta(seconds=0.2),
            run_model_attempts=1,
        ),
    )
    async with in_process_worker(client, flow, tmp_path / "runtime.sqlite") as served:
        yield served.sessions

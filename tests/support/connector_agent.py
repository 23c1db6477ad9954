"""A Claude agent on the fake CLI whose tools come from the fake ledger connector."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

from dex_agents import AgentSessionOptions, ToolPolicy
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.connectors import ConnectorToolSource
from dex_agents.session._tool_sources import SourceTool, ToolSource, ToolSourceContext
from dex_agents.temporal import SessionClient
from dex_agents.testing import Ledger
from dex_agents.testing._fake_ledger_connector import fake_ledger_connector_tools
from support.fake_cli import fake_claude_cli_path
from support.session_harness import in_process_worker


@dataclass(kw_only=True)
class ConnectorRig:
    """One test's session client and the provider's ledger."""

    sessions: SessionClient
    ledger: Ledger


@asynccontextmanager
async def connector_agent(
    client: Any,
    flow_type: str,
    tmp_path: Path,
    *,
    sources: Sequence[ToolSource] | None = None,
    tool_policies: dict[str, ToolPolicy] | None = None,
    hooks: list[HookMatcher] | None = None,
    allowed_tools: list[str] | None = None,
) -> AsyncIterator[ConnectorRig]:
    """Serve the agent from a worker in the test process."""
    ledger_path = str(tmp_path / "ledger.jsonl")
    if sources is None:
        sources = [ConnectorToolSource(fake_ledger_connector_tools(ledger_path))]
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
            hooks={"PreToolUse": list(hooks)} if hooks else None,
            allowed_tools=list(allowed_tools or []),
        )

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=options,
            tool_sources=list(sources),
            tool_policies=dict(tool_policies or {}),
            tool_source_listing_timeout=timedelta(seconds=2),
        ),
        flow_type,
        AgentSessionOptions(
            heartbeat_timeout=timedelta(seconds=2),
            retry_interval=timedelta(seconds=0.2),
            run_model_attempts=1,
        ),
    )
    async with in_process_worker(client, flow, tmp_path / "runtime.sqlite") as served:
        yield ConnectorRig(sessions=served.sessions, ledger=Ledger(ledger_path))


class SwitchableSource:
    """Lists the ledger's `transfer` until switched: then nothing, or a failure."""

    def __init__(self, inner: ConnectorToolSource, *, source_name: str) -> None:
        self._inner = inner
        self.source_name = source_name
        self.declared_tool_names: Sequence[str] = ()
        self.mode: str = "list"
        """`list`, `empty` (lists nothing) or `fail` (the listing raises)."""
        self.listings: list[str] = []
        """The mode of every listing, in order."""

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        self.listings.append(self.mode)
        if self.mode == "fail":
            raise ConnectionError("the ledger's tool catalogue is down")
        if self.mode == "empty":
            return []
        return [
            t for t in await self._inner.list_tools(context) if t.name == "transfer"
        ]

    async def build_call(self, tool_name: str, arguments: Any) -> Any:
        return await self._inner.build_call(tool_name, arguments)

    async def execute_deferred_tool_call(self, call: Any, execution: Any) -> Any:
        return await self._inner.execute_deferred_tool_call(call, execution)

    def tool_call_step_options(self, tool_name: str) -> Any:
        return self._inner.tool_call_step_options(tool_name)


def switchable_source(tmp_path: Path) -> SwitchableSource:
    return SwitchableSource(
        ConnectorToolSource(
            fake_ledger_connector_tools(str(tmp_path / "ledger.jsonl"))
        ),
        source_name="dynamic",
    )

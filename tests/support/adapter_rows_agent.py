"""The agent of `test_adapter_rows_durable`: fake CLI, tools that count their runs.

A uniquely named module next to the tests (no `__init__.py`), served by a worker
in the test process, so its tools count into plain lists.

- `inspect_order` is a read that requires approval; its first attempt fails
  when its input says `fail_first`, so a retry proves it ran in CallTool;
- `sync_crm` is an idempotent write whose handler always throws;
- `charge_card` is a non-idempotent write whose handler always throws;
- `Agent`/`Task` are reads, so a subagent call runs inside the segment.

A session whose ID starts with `forbidden-` gets options with
`permission_mode="bypassPermissions"`, which the adapter refuses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, tool
from temporalio.client import Client

from dex_agents import AgentSessionOptions, ToolPolicy, current_deferred_tool_execution
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.session._records import DeferredToolExecution
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.fake_cli import fake_claude_cli_path

FORBIDDEN_PREFIX = "forbidden-"
TOOL_ATTEMPTS = 3
RUN_MODEL_ATTEMPTS = 3


@dataclass(kw_only=True)
class ToolRun:
    """One handler run: its input and the tool Step it ran in (None: inline)."""

    tool: str
    arguments: dict[str, Any]
    execution: DeferredToolExecution | None


@dataclass(kw_only=True)
class RowsAgent:
    sessions: SessionClient
    runs: list[ToolRun] = field(default_factory=lambda: [])
    options_built: list[ClaudeAgentOptionsContext] = field(default_factory=lambda: [])

    def runs_of(self, name: str) -> list[ToolRun]:
        return [r for r in self.runs if r.tool == name]

    def attempts_of(self, flow_id: str) -> list[ClaudeAgentOptionsContext]:
        """The RunModel attempts of a session, by the options they built."""
        return [c for c in self.options_built if c.flow_id == flow_id]


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@asynccontextmanager
async def rows_agent(
    client: Client, flow_type: str, tmp_path: Path
) -> AsyncIterator[RowsAgent]:
    """Serve the agent from a worker in the test process."""
    runs: list[ToolRun] = []
    built: list[ClaudeAgentOptionsContext] = []

    def ran(name: str, args: dict[str, Any]) -> DeferredToolExecution | None:
        execution = current_deferred_tool_execution()
        runs.append(ToolRun(tool=name, arguments=dict(args), execution=execution))
        return execution

    @tool(
        "inspect_order",
        "Inspect an order",
        {
            "type": "object",
            "properties": {
                "orderId": {"type": "string"},
                "fail_first": {"type": "boolean"},
            },
            "required": ["orderId"],
        },
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def inspect_order(args: dict[str, Any]) -> dict[str, Any]:
        execution = ran("inspect_order", args)
        attempt = 0 if execution is None else execution.attempt
        if args.get("fail_first") and attempt <= 1:
            raise ConnectionError(f"order service unavailable (attempt {attempt})")
        return _text(f"order {args['orderId']}: inspected")

    @tool("sync_crm", "Sync the CRM", {"account": str})
    async def sync_crm(args: dict[str, Any]) -> dict[str, Any]:
        ran("sync_crm", args)
        raise RuntimeError("crm sync threw")

    @tool("charge_card", "Charge a card", {"amount": int})
    async def charge_card(args: dict[str, Any]) -> dict[str, Any]:
        ran("charge_card", args)
        raise RuntimeError("payment gateway threw")

    cli_path = fake_claude_cli_path()

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        built.append(context)
        cwd = tmp_path / "sessions" / context.flow_id
        cwd.mkdir(parents=True, exist_ok=True)
        forbidden = context.flow_id.startswith(FORBIDDEN_PREFIX)
        return ClaudeAgentOptions(
            cli_path=cli_path,
            cwd=str(cwd.resolve()),
            tools=["Agent"],
            setting_sources=[],
            env={},
            permission_mode="bypassPermissions" if forbidden else None,
        )

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=options,
            custom_tools=[inspect_order, sync_crm, charge_card],
            tool_policies={
                "inspect_order": ToolPolicy(effect="read", requires_approval=True),
                "sync_crm": ToolPolicy(effect="idempotent_write"),
                "charge_card": ToolPolicy(effect="non_idempotent_write"),
                "Agent": ToolPolicy(effect="read"),
                "Task": ToolPolicy(effect="read"),
            },
        ),
        flow_type,
        AgentSessionOptions(
            heartbeat_timeout=timedelta(seconds=5),
            retry_interval=timedelta(seconds=0.1),
            run_model_attempts=RUN_MODEL_ATTEMPTS,
            tool_attempts=TOOL_ATTEMPTS,
        ),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    try:
        async with create_worker(client, [flow], store=store):
            yield RowsAgent(
                sessions=SessionClient(client, flow, store),
                runs=runs,
                options_built=built,
            )
    finally:
        await store.close()

"""A small Claude agent on the fake CLI, served in-process, whose options a test chooses.

Unlike `fake_suite_agent` it lets a test choose what the engine tests turn on: the
custom tool server's name, `allowed_tools`, the session options (the real
defaults, or a spend limit), and a recording `cli_path` that logs every CLI
run's argv. Its tools record their runs in a JSON-lines `Ledger`:

- `audit_lookup` has no annotations; the definition's policy makes it a read;
- `audit_refund` is a non-idempotent write by the definition's policy;
- `audit_charge` has neither policy nor annotations (the session's default
  effect decides it) and always raises after recording its attempt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, tool
from temporalio.client import Client

from dex_agents import AgentSessionOptions, ToolPolicy
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.claude._definition import DEFAULT_CUSTOM_TOOL_SERVER_NAME
from dex_agents.temporal import SessionClient
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import Ledger
from support.fake_cli import fake_claude_cli_path
from support.session_harness import in_process_worker


def audit_tools(ledger: Ledger) -> list[Any]:
    """The agent's custom tools; every run is a ledger row."""

    @tool("audit_lookup", "Look up an order", {"orderId": str})
    async def audit_lookup(args: dict[str, Any]) -> dict[str, Any]:
        ledger.record("audit_lookup", order_id=args["orderId"])
        return _text(f"order {args['orderId']}: arrived broken")

    @tool("audit_refund", "Refund an order", {"orderId": str})
    async def audit_refund(args: dict[str, Any]) -> dict[str, Any]:
        ledger.record("audit_refund", order_id=args["orderId"])
        return _text(f"refunded order {args['orderId']}")

    @tool("audit_charge", "Charge a card", {"amount": int})
    async def audit_charge(args: dict[str, Any]) -> dict[str, Any]:
        ledger.record("audit_charge_attempt", amount=args["amount"])
        raise ConnectionError("payment provider unreachable")

    return [audit_lookup, audit_refund, audit_charge]


AUDIT_POLICIES = {
    "audit_lookup": ToolPolicy(effect="read"),
    "audit_refund": ToolPolicy(effect="non_idempotent_write"),
}
"""By bare name, whatever the server is called; `audit_charge` has none."""


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@dataclass(kw_only=True)
class AuditRig:
    """One test's session client and ledger."""

    sessions: SessionClient
    ledger: Ledger
    flow: AgentSessionFlow


def build_audit_flow(
    *,
    flow_type: str,
    base: Path,
    ledger: Ledger,
    session_options: AgentSessionOptions,
    server_name: str = DEFAULT_CUSTOM_TOOL_SERVER_NAME,
    allowed_tools: Sequence[str] = (),
    cli_path: Path | None = None,
) -> AgentSessionFlow:
    """The audit agent's session flow under `flow_type`."""
    workdir = base / "sessions"
    path = str(cli_path or fake_claude_cli_path())

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        cwd = workdir / context.flow_id
        cwd.mkdir(parents=True, exist_ok=True)
        return ClaudeAgentOptions(
            cli_path=path,
            cwd=str(cwd.resolve()),
            tools=["Bash"],
            setting_sources=[],
            env={},
            allowed_tools=list(allowed_tools),
        )

    return create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=options,
            custom_tools=audit_tools(ledger),
            tool_policies=AUDIT_POLICIES,
            custom_tool_server_name=server_name,
        ),
        flow_type,
        session_options,
    )


@asynccontextmanager
async def audit_rig(
    client: Client,
    *,
    flow_type: str,
    base: Path,
    session_options: AgentSessionOptions,
    server_name: str = DEFAULT_CUSTOM_TOOL_SERVER_NAME,
    allowed_tools: Sequence[str] = (),
    cli_path: Path | None = None,
) -> AsyncIterator[AuditRig]:
    """The audit agent served by a worker inside the test process."""
    ledger = Ledger(base / "audit-ledger.jsonl")
    flow = build_audit_flow(
        flow_type=flow_type,
        base=base,
        ledger=ledger,
        session_options=session_options,
        server_name=server_name,
        allowed_tools=allowed_tools,
        cli_path=cli_path,
    )
    async with in_process_worker(client, flow, base / "audit-runtime.sqlite") as served:
        yield AuditRig(sessions=served.sessions, ledger=ledger, flow=flow)

"""The support agent with a refund that counts every run, for the hot resume tests.

The README's agent ignores a repeated idempotency key (as a payment provider
would), which would hide a second run; this refund writes a row for every
call, so the tests count runs, not refunds. The window and the limit come
from the environment, so a worker subprocess serves the same flow:
`DEX_AGENTS_HOT_WINDOW` (seconds, default 120) and `DEX_AGENTS_MAX_PARKED`
(default 4); `DEX_AGENTS_REFUND_SECONDS` makes each refund take that long.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from claude_agent_sdk import tool

from dex_agents import AgentSessionOptions, ToolPolicy, current_deferred_tool_execution
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.examples import support_agent
from dex_agents.temporal._flow import AgentSessionFlow


def runs_path() -> Path:
    return Path(os.environ["DEX_AGENTS_EXAMPLE_DB"]).with_name("refund-runs.sqlite")


def refund_runs() -> list[tuple[str, str]]:
    """Every run of the refund: (order_id, idempotency_key), repeats included."""
    with sqlite3.connect(runs_path()) as db:
        db.execute("CREATE TABLE IF NOT EXISTS runs (order_id TEXT, key TEXT)")
        return list(db.execute("SELECT order_id, key FROM runs ORDER BY rowid"))


@tool("create_refund", "Refund an order", {"orderId": str})
async def create_refund(args: dict[str, Any]) -> dict[str, Any]:
    execution = current_deferred_tool_execution()
    key = execution.idempotency_key if execution else "inline"
    await asyncio.sleep(float(os.environ.get("DEX_AGENTS_REFUND_SECONDS", "0")))
    with sqlite3.connect(runs_path()) as db:
        db.execute("CREATE TABLE IF NOT EXISTS runs (order_id TEXT, key TEXT)")
        db.execute("INSERT INTO runs VALUES (?, ?)", (str(args["orderId"]), key))
    return {"content": [{"type": "text", "text": f"refunded order {args['orderId']}"}]}


def build_flow(
    window: float | None = None,
    max_parked: int | None = None,
    flow_type: str = "HotAgent",
    continue_as_new_after_events: int | None = None,
) -> AgentSessionFlow:
    """The flow, with the window and limit given or from the environment."""
    if window is None:
        window = float(os.environ.get("DEX_AGENTS_HOT_WINDOW", "120"))
    if max_parked is None:
        max_parked = int(os.environ.get("DEX_AGENTS_MAX_PARKED", "4"))
    return create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=support_agent.options,
            custom_tools=[support_agent.lookup_order, create_refund],
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        ),
        flow_type,
        AgentSessionOptions(
            hot_resume_window=timedelta(seconds=window),
            max_parked_segments=max_parked,
            continue_as_new_after_events=continue_as_new_after_events,
        ),
    )


flow = build_flow()

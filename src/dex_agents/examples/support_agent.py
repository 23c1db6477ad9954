"""The support agent of the README: a read tool, a refund that waits for approval, and Bash.

`lookup_order` is a read: it runs inside the turn. `create_refund` is a
non-idempotent write: it waits for approval, then runs exactly once in its own
Step with an idempotency key. Bash has no policy, so it is unclassified: every
call waits for approval and then runs inside the resumed turn.

The orders and refunds live in a small SQLite ledger (`DEX_AGENTS_EXAMPLE_DB`,
default `support.sqlite` in the state directory: `DEX_AGENTS_STATE_DIR`, else
`.dex-agents/`), so you can see that a refund ran once.

It ships inside the package, so `--agent dex_agents.examples.support_agent:flow`
works from any directory and from an installed wheel (`examples/support_agent.py`
in the repository re-exports it). Needs the `claude` extra.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

# `dex_agents.claude` first: without the `claude` extra it says how to install it.
from dex_agents.claude import (  # isort: skip
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, tool  # isort: skip

from dex_agents import AgentSessionOptions, ToolPolicy, current_deferred_tool_execution

ORDERS = {
    "7": "order 7: a blue kettle, delivered 2026-11-20, customer reports it arrived broken",
    "8": "order 8: two mugs, delivered 2026-11-21, no complaint",
}


def _state_dir() -> Path:
    """The state directory the engine uses when none is passed (see `resolve_state_dir`)."""
    return Path(os.environ.get("DEX_AGENTS_STATE_DIR") or ".dex-agents")


def ledger_path() -> Path:
    """Where the example keeps its refunds."""
    path = Path(
        os.environ.get("DEX_AGENTS_EXAMPLE_DB") or _state_dir() / "support.sqlite"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _ledger() -> sqlite3.Connection:
    db = sqlite3.connect(ledger_path())
    db.execute(
        "CREATE TABLE IF NOT EXISTS refunds ("
        " idempotency_key TEXT PRIMARY KEY, order_id TEXT, created_at TEXT DEFAULT CURRENT_TIMESTAMP)"
    )
    return db


def refunds() -> list[tuple[str, str]]:
    """Every refund row: (order_id, idempotency_key)."""
    with _ledger() as db:
        return list(
            db.execute("SELECT order_id, idempotency_key FROM refunds ORDER BY rowid")
        )


@tool(
    "lookup_order",
    "Look up an order by its ID",
    {"orderId": str},
    annotations=ToolAnnotations(readOnlyHint=True),
)
async def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
    """A read: runs inside the turn, no approval."""
    text = ORDERS.get(str(args["orderId"]), f"no order {args['orderId']}")
    return {"content": [{"type": "text", "text": text}]}


@tool("create_refund", "Refund an order", {"orderId": str})
async def create_refund(args: dict[str, Any]) -> dict[str, Any]:
    """A write: runs once, after approval, in its own Step with an idempotency key."""
    execution = current_deferred_tool_execution()
    key = execution.idempotency_key if execution else f"inline/{args['orderId']}"
    with _ledger() as db:
        # The idempotency key makes a repeated refund a no-op at the "provider".
        db.execute(
            "INSERT OR IGNORE INTO refunds (idempotency_key, order_id) VALUES (?, ?)",
            (key, str(args["orderId"])),
        )
    return {"content": [{"type": "text", "text": f"refunded order {args['orderId']}"}]}


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A session ID that is a safe directory name as it is (`session-1`)."""


def session_dir(flow_id: str, workdir: Path) -> Path:
    """The session's own directory under `workdir`: the same for every segment.

    A session ID is any text (`../../etc`, 1000 bytes, `a;b/ç`), so one that
    is not a plain, short file name becomes a readable prefix of its letters
    and digits and a hash of the whole ID (`etc+74ccf3c5b4c19a81`): never a
    path outside `workdir`, never too long a name, never another ID's.
    """
    if _PLAIN_NAME.fullmatch(flow_id):
        return workdir / flow_id
    prefix = re.sub(r"[^A-Za-z0-9]+", "-", flow_id).strip("-")[:40] or "session"
    digest = hashlib.sha256(flow_id.encode("utf-8", "surrogatepass")).hexdigest()
    return workdir / f"{prefix}+{digest[:16]}"


def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
    """Options per segment; the same `cwd` for every segment of a session."""
    workdir = Path(
        os.environ.get("DEX_AGENTS_EXAMPLE_WORKDIR") or _state_dir() / "agents"
    )
    cwd = session_dir(context.flow_id, workdir)
    cwd.mkdir(parents=True, exist_ok=True)
    return ClaudeAgentOptions(
        model=os.environ.get("DEX_AGENTS_EXAMPLE_MODEL", "claude-sonnet-4-5"),
        system_prompt="You resolve order problems.",
        tools=["Read", "Grep", "Bash"],
        cwd=str(cwd.resolve()),
        setting_sources=[],
    )


flow = create_claude_agent_session_flow(
    ClaudeAgentDefinition(
        options=options,
        custom_tools=[lookup_order, create_refund],
        tool_policies={
            "create_refund": ToolPolicy(effect="non_idempotent_write"),
            "Read": ToolPolicy(effect="read"),
            "Grep": ToolPolicy(effect="read"),
        },
    ),
    "SupportAgent",
    AgentSessionOptions(interrupt_deadline=timedelta(hours=24)),
)

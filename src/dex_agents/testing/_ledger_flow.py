"""A ready-made scripted flow with ledger-backed tools, for tests and crash drills."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from .._errors import ToolExecutionError, UserError
from ..notify import WebhookNotifier
from ..session import AgentSessionOptions, ToolPolicy
from ..session._json import JsonObject
from ..session._records import DeferredToolExecution
from ..temporal import create_agent_session_flow
from ..temporal._flow import AgentSessionFlow
from ._ledger import Ledger
from ._scripted_runner import ScriptedRunner, ToolHandler

LEDGER_TOOL_POLICIES = {
    "lookup_order": ToolPolicy(effect="read"),
    "create_refund": ToolPolicy(effect="non_idempotent_write"),
    "send_email": ToolPolicy(effect="idempotent_write"),
    "check_stock": ToolPolicy(effect="read", requires_approval=True),
}


LEDGER_FLOW_ENV = "DEX_AGENTS_TESTING_LEDGER_FLOW"
"""A worker subprocess's `LedgerFlowConfig`, as JSON (see `ledger_flow_from_env`)."""

LEDGER_INPUT_SCHEMAS: dict[str, JsonObject] = {
    "create_refund": {
        "type": "object",
        "properties": {
            "orderId": {"type": "string", "minLength": 1},
            "gate": {"type": "string"},
            "invalid": {"type": "boolean"},
        },
        "required": ["orderId"],
    }
}
"""`create_refund`'s input, checked when a person edits a call of it."""


@dataclass(frozen=True, kw_only=True)
class LedgerFlowConfig:
    """What a worker process needs to rebuild the same flow (JSON-serializable)."""

    flow_type: str
    ledger_path: str
    gate_dir: str
    heartbeat_seconds: float = 2.0
    retry_seconds: float = 0.2
    interrupt_deadline_seconds: float | None = None
    continue_as_new_after_events: int | None = None
    max_input_bytes: int | None = None
    """The scripted model's input limit (see `ScriptedRunner`); None: no limit."""
    spend_limit: float | None = None
    """The session's `spend_limit` (each scripted segment costs 0.001 USD)."""
    run_model_attempts: int = 3
    """The session's `run_model_attempts`: how many times a model segment runs."""
    webhook_url: str | None = None
    """Approvals are POSTed here (`WebhookNotifier`, signed with `webhook_secret`)."""
    webhook_secret: str = "ledger-webhook-secret"
    interrupt_reminder_seconds: float | None = None
    notification_attempts: int = 5
    extra: dict[str, str] = field(default_factory=lambda: {})


def ledger_tools(ledger: Ledger, gate_dir: Path) -> dict[str, ToolHandler]:
    """Tools whose every side effect is a ledger row.

    `create_refund` with `"gate": name` stops at that gate after it started, so a
    test can kill the worker in the middle of the write; `lookup_order` (a read,
    inline) does the same in the middle of a model segment. `send_email` with
    `"fail_attempts": n` fails its first n attempts, and with `"gate": name` its
    first attempt stops at that gate; each attempt records the heartbeat
    checkpoint it found and leaves `{"reached_attempt": n}` for the next.
    """

    async def lookup_order(
        args: JsonObject, execution: DeferredToolExecution | None
    ) -> str:
        ledger.record("lookup_order", order_id=args.get("orderId"))
        gate = args.get("gate")
        if isinstance(gate, str):
            (gate_dir / f"{gate}.reached").write_text("")
            while not (gate_dir / gate).exists():
                await asyncio.sleep(0.02)
        return f"order {args.get('orderId')}: arrived broken"

    async def create_refund(
        args: JsonObject, execution: DeferredToolExecution | None
    ) -> str:
        key = execution.idempotency_key if execution else None
        ledger.record("create_refund_started", order_id=args.get("orderId"), key=key)
        gate = args.get("gate")
        if isinstance(gate, str):
            (gate_dir / f"{gate}.reached").write_text("")
            while not (gate_dir / gate).exists():
                await asyncio.sleep(0.02)
        if args.get("invalid"):
            raise ToolExecutionError(f"order {args.get('orderId')} cannot be refunded")
        ledger.record("create_refund", order_id=args.get("orderId"), key=key)
        return f"refunded order {args.get('orderId')}"

    async def send_email(
        args: JsonObject, execution: DeferredToolExecution | None
    ) -> str:
        attempt = execution.attempt if execution else 0
        key = execution.idempotency_key if execution else None
        ledger.record(
            "send_email_attempt",
            key=key,
            attempt=attempt,
            checkpoint=execution.heartbeat_checkpoint if execution else None,
        )
        if execution is not None:
            execution.record_heartbeat_checkpoint({"reached_attempt": attempt})
        gate = args.get("gate")
        if isinstance(gate, str) and attempt == 1:
            (gate_dir / f"{gate}.reached").write_text("")
            while not (gate_dir / gate).exists():
                await asyncio.sleep(0.02)
        fail_attempts = args.get("fail_attempts", 0)
        if isinstance(fail_attempts, int) and attempt <= fail_attempts:
            raise ConnectionError(f"mail server unavailable (attempt {attempt})")
        ledger.record("send_email", key=key, to=args.get("to"))
        return f"sent to {args.get('to')}"

    async def check_stock(
        args: JsonObject, execution: DeferredToolExecution | None
    ) -> str:
        ledger.record("check_stock", sku=args.get("sku"))
        return f"{args.get('sku')}: 3 left"

    return {
        "lookup_order": lookup_order,
        "create_refund": create_refund,
        "send_email": send_email,
        "check_stock": check_stock,
    }


def ledger_flow(config: LedgerFlowConfig) -> AgentSessionFlow:
    """The scripted flow described by `config`."""
    gate_dir = Path(config.gate_dir)
    runner = ScriptedRunner(
        ledger_tools(Ledger(config.ledger_path), gate_dir),
        input_schemas=LEDGER_INPUT_SCHEMAS,
        gate_dir=gate_dir,
        max_input_bytes=config.max_input_bytes,
    )
    deadline = config.interrupt_deadline_seconds
    return create_agent_session_flow(
        runner,
        config.flow_type,
        AgentSessionOptions(
            tool_policies=LEDGER_TOOL_POLICIES,
            heartbeat_timeout=timedelta(seconds=config.heartbeat_seconds),
            retry_interval=timedelta(seconds=config.retry_seconds),
            interrupt_deadline=timedelta(seconds=deadline) if deadline else None,
            continue_as_new_after_events=config.continue_as_new_after_events,
            spend_limit=config.spend_limit,
            run_model_attempts=config.run_model_attempts,
            on_interrupt=WebhookNotifier(config.webhook_url, config.webhook_secret)
            if config.webhook_url
            else None,
            interrupt_reminder=timedelta(seconds=config.interrupt_reminder_seconds)
            if config.interrupt_reminder_seconds
            else None,
            notification_attempts=config.notification_attempts,
        ),
    )


def ledger_flow_from_env() -> AgentSessionFlow:
    """The flow of the `LedgerFlowConfig` in `DEX_AGENTS_TESTING_LEDGER_FLOW` (a worker subprocess's)."""
    raw = os.environ.get(LEDGER_FLOW_ENV)
    if raw is None:
        raise UserError(
            f"{LEDGER_FLOW_ENV} is not set; start the worker with "
            "`dex_agents.testing.WorkerProcess(WorkerProcessConfig(flow=...))`"
        )
    return ledger_flow(LedgerFlowConfig(**json.loads(raw)))

"""A fake connector over a JSON-lines ledger, for connector-tool tests.

Every provider effect is a `Ledger` row, so a test (and a SIGKILLed worker's
replacement) counts what really reached the provider:

- `read_balance` (query): a `ledger_query` row, answers the account's balance;
- `append_entry` (mutation, retry safe): a `ledger_attempt` row per attempt,
  then one `ledger_entry` per call ID (the provider deduplicates). Its first
  `fail_attempts` attempts raise; `uncertain` applies the entry and then
  reports an unknown outcome. The manifest asks approval by predicate: amounts
  above 100;
- `transfer` (mutation, retry unsafe): one `ledger_entry`; always approved;
- `start_export` (query) starts a task; `confirm_account` (query) asks a question;
- `purge_ledger` is in code but hidden by the manifest, so it is never offered;
- `start_import` (mutation, retry unsafe, always approved) starts a task;
- `post_payment` (mutation, retry safe, never approved): a `payment_attempt` row
  per attempt (`fenced`: whether it was handed an earlier attempt's fence), then one `payment` per call ID (the provider deduplicates), and
  only then, with `"gate"` in its input, it waits at that gate: a worker
  SIGKILLed there applied the payment but never reported it;
- `wire_funds` (mutation, retry unsafe, always approved): a `wire_started` row,
  then with `"gate"` it waits at that gate, then one `wire` row;
- `flaky_lookup` (query, 2 attempts): a `flaky_attempt` row, then it raises;
- `slow_lookup` (query, 1 s timeout, 1 attempt): a `slow_attempt` row, then it
  sleeps `seconds` (20 by default) before it answers.

A gate `g` is the file `<gate_dir>/g`; an operation waiting there first writes
`<gate_dir>/g.reached`. `gate_dir` defaults to `connector-gates` beside the ledger.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..connectors import (
    ConnectorInvocation,
    ConnectorOperation,
    ConnectorOutcomeUnknown,
    ConnectorResult,
    ConnectorTool,
    connector_tool,
)
from ..session import JsonObject, SourceQuestion, SourceTaskStarted
from ._ledger import Ledger

FAKE_LEDGER_MANIFEST: dict[str, Any] = {
    "connector": "fake-ledger",
    "operations": {
        "read_balance": {"kind": "query", "approval": "never"},
        "append_entry": {"kind": "mutation", "retry": "safe", "approval": "predicate"},
        "transfer": {"kind": "mutation", "retry": "unsafe", "approval": "always"},
        "start_export": {"kind": "query", "approval": "never"},
        "confirm_account": {"kind": "query", "approval": "never"},
        "purge_ledger": {"kind": "mutation", "expose": False},
        "start_import": {"kind": "mutation", "retry": "unsafe", "approval": "always"},
        "post_payment": {"kind": "mutation", "retry": "safe", "approval": "never"},
        "wire_funds": {"kind": "mutation", "retry": "unsafe", "approval": "always"},
        "flaky_lookup": {"kind": "query", "approval": "never"},
        "slow_lookup": {"kind": "query", "approval": "never"},
    },
}
"""The reviewed manifest of the fake ledger connector."""

_ENTRY_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "account": {"type": "string"},
        "amount": {"type": "integer"},
        "fail_attempts": {"type": "integer"},
        "uncertain": {"type": "boolean"},
    },
    "required": ["account", "amount"],
}
_GATED_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "account": {"type": "string"},
        "amount": {"type": "integer"},
        "gate": {"type": "string"},
    },
    "required": ["account", "amount"],
}
_SLOW_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"account": {"type": "string"}, "seconds": {"type": "number"}},
    "required": ["account"],
}
SLOW_LOOKUP_TIMEOUT = timedelta(seconds=1)
"""The tool Step timeout of `slow_lookup`: far below the session's `tool_limit`."""
FLAKY_LOOKUP_ATTEMPTS = 2
"""The tool Step attempts of `flaky_lookup`: fewer than the session's `tool_attempts`."""


def fake_ledger_gate_dir(ledger_path: str) -> Path:
    """Where the operations of the ledger at `ledger_path` wait at gates by default."""
    return Path(ledger_path).parent / "connector-gates"


async def _wait_at_gate(gate_dir: Path, gate: str) -> None:
    gate_dir.mkdir(parents=True, exist_ok=True)
    (gate_dir / f"{gate}.reached").touch()
    while not (gate_dir / gate).exists():
        await asyncio.sleep(0.02)


_ACCOUNT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"account": {"type": "string"}},
    "required": ["account"],
}


def fake_ledger_operations(
    ledger_path: str,
    *,
    timeout: timedelta = timedelta(seconds=30),
    gate_dir: str | None = None,
) -> list[ConnectorOperation]:
    """The connector's operations, writing to the ledger at `ledger_path`."""
    ledger = Ledger(ledger_path)
    gates = Path(gate_dir) if gate_dir else fake_ledger_gate_dir(ledger_path)

    def balance(account: str) -> int:
        return sum(
            int(e.get("amount", 0))  # pyright: ignore[reportArgumentType]
            for e in ledger.entries("ledger_entry")
            if e.get("account") == account
        )

    async def read_balance(inv: ConnectorInvocation) -> ConnectorResult:
        account = str(inv.arguments["account"])
        ledger.record("ledger_query", account=account, call_id=inv.call_id)
        return f"balance of {account}: {balance(account)}"

    async def append_entry(inv: ConnectorInvocation) -> ConnectorResult:
        args = inv.arguments
        ledger.record(
            "ledger_attempt", call_id=inv.call_id, attempt=inv.attempt, args=args
        )
        if inv.attempt <= int(args.get("fail_attempts", 0)):  # pyright: ignore[reportArgumentType]
            raise ConnectionError(f"ledger unavailable (attempt {inv.attempt})")
        done = [
            e for e in ledger.entries("ledger_entry") if e["call_id"] == inv.call_id
        ]
        if not done:
            ledger.record(
                "ledger_entry",
                call_id=inv.call_id,
                account=args["account"],
                amount=args["amount"],
                reference=inv.reference,
            )
        if args.get("uncertain"):
            raise ConnectorOutcomeUnknown(
                "the ledger timed out after the write was sent"
            )
        return f"appended {args['amount']} to {args['account']}"

    async def transfer(inv: ConnectorInvocation) -> ConnectorResult:
        args = inv.arguments
        ledger.record(
            "ledger_entry",
            call_id=inv.call_id,
            account=args["account"],
            amount=args["amount"],
            reference=inv.reference,
        )
        return f"transferred {args['amount']} to {args['account']}"

    async def start_export(inv: ConnectorInvocation) -> ConnectorResult:
        ledger.record("ledger_export", call_id=inv.call_id)
        return SourceTaskStarted(task_id=f"export-{inv.call_id}")

    async def confirm_account(inv: ConnectorInvocation) -> ConnectorResult:
        return SourceQuestion(question=f"Is {inv.arguments['account']} the right one?")

    async def purge_ledger(inv: ConnectorInvocation) -> ConnectorResult:
        ledger.record("ledger_purge", call_id=inv.call_id)
        return "purged"

    async def start_import(inv: ConnectorInvocation) -> ConnectorResult:
        ledger.record("ledger_import", call_id=inv.call_id)
        return SourceTaskStarted(task_id=f"import-{inv.call_id}")

    async def post_payment(inv: ConnectorInvocation) -> ConnectorResult:
        args = inv.arguments
        ledger.record(
            "payment_attempt",
            call_id=inv.call_id,
            attempt=inv.attempt,
            fenced=inv.earlier_fence is not None,
        )
        done = [e for e in ledger.entries("payment") if e["call_id"] == inv.call_id]
        if not done:
            ledger.record(
                "payment",
                call_id=inv.call_id,
                account=args["account"],
                amount=args["amount"],
            )
        gate = args.get("gate")
        if isinstance(gate, str):
            # Applied, not yet reported: a SIGKILL here loses only the answer.
            await _wait_at_gate(gates, gate)
        return f"paid {args['amount']} to {args['account']}"

    async def wire_funds(inv: ConnectorInvocation) -> ConnectorResult:
        args = inv.arguments
        ledger.record("wire_started", call_id=inv.call_id, attempt=inv.attempt)
        gate = args.get("gate")
        if isinstance(gate, str):
            await _wait_at_gate(gates, gate)
        ledger.record(
            "wire", call_id=inv.call_id, account=args["account"], amount=args["amount"]
        )
        return f"wired {args['amount']} to {args['account']}"

    async def flaky_lookup(inv: ConnectorInvocation) -> ConnectorResult:
        ledger.record("flaky_attempt", call_id=inv.call_id, attempt=inv.attempt)
        raise ConnectionError(f"lookup unavailable (attempt {inv.attempt})")

    async def slow_lookup(inv: ConnectorInvocation) -> ConnectorResult:
        ledger.record("slow_attempt", call_id=inv.call_id, attempt=inv.attempt)
        await asyncio.sleep(float(inv.arguments.get("seconds", 20)))  # pyright: ignore[reportArgumentType]
        ledger.record("slow_answer", call_id=inv.call_id, attempt=inv.attempt)
        return f"slow balance of {inv.arguments['account']}"

    def large(arguments: Mapping[str, Any]) -> bool:
        return int(arguments.get("amount", 0)) > 100

    return [
        ConnectorOperation(
            name="read_balance",
            description="Read an account's balance",
            input_schema=_ACCOUNT_SCHEMA,
            kind="query",
            invoke=read_balance,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="append_entry",
            description="Append an entry to an account",
            input_schema=_ENTRY_SCHEMA,
            kind="mutation",
            retry="safe",
            invoke=append_entry,
            requires_approval=large,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="transfer",
            description="Transfer an amount to an account",
            input_schema=_ENTRY_SCHEMA,
            kind="mutation",
            invoke=transfer,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="start_export",
            description="Export the ledger",
            input_schema={"type": "object"},
            kind="query",
            invoke=start_export,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="confirm_account",
            description="Confirm an account",
            input_schema=_ACCOUNT_SCHEMA,
            kind="query",
            invoke=confirm_account,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="purge_ledger",
            description="Delete every entry",
            input_schema={"type": "object"},
            kind="mutation",
            invoke=purge_ledger,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="start_import",
            description="Import entries into the ledger",
            input_schema={"type": "object"},
            kind="mutation",
            invoke=start_import,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="post_payment",
            description="Pay an amount to an account",
            input_schema=_GATED_SCHEMA,
            kind="mutation",
            retry="safe",
            invoke=post_payment,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="wire_funds",
            description="Wire an amount to an account",
            input_schema=_GATED_SCHEMA,
            kind="mutation",
            invoke=wire_funds,
            timeout=timeout,
        ),
        ConnectorOperation(
            name="flaky_lookup",
            description="Look an account up at a flaky provider",
            input_schema=_ACCOUNT_SCHEMA,
            kind="query",
            invoke=flaky_lookup,
            timeout=timeout,
            attempts=FLAKY_LOOKUP_ATTEMPTS,
        ),
        ConnectorOperation(
            name="slow_lookup",
            description="Look an account up at a slow provider",
            input_schema=_SLOW_SCHEMA,
            kind="query",
            invoke=slow_lookup,
            timeout=SLOW_LOOKUP_TIMEOUT,
            attempts=1,
        ),
    ]


def fake_ledger_connector_tools(
    ledger_path: str,
    *,
    reference: str = "ledger-main",
    manifest: Mapping[str, Any] = FAKE_LEDGER_MANIFEST,
    gate_dir: str | None = None,
) -> list[ConnectorTool]:
    """Every operation bound to `reference` under `manifest`."""
    return [
        connector_tool(op, reference, manifest=manifest)
        for op in fake_ledger_operations(ledger_path, gate_dir=gate_dir)
    ]

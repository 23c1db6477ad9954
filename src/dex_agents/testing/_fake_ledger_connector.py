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
- `purge_ledger` is in code but hidden by the manifest, so it is never offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
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
_ACCOUNT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"account": {"type": "string"}},
    "required": ["account"],
}


def fake_ledger_operations(
    ledger_path: str, *, timeout: timedelta = timedelta(seconds=30)
) -> list[ConnectorOperation]:
    """The connector's operations, writing to the ledger at `ledger_path`."""
    ledger = Ledger(ledger_path)

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
    ]


def fake_ledger_connector_tools(
    ledger_path: str,
    *,
    reference: str = "ledger-main",
    manifest: Mapping[str, Any] = FAKE_LEDGER_MANIFEST,
) -> list[ConnectorTool]:
    """Every operation bound to `reference` under `manifest`."""
    return [
        connector_tool(op, reference, manifest=manifest)
        for op in fake_ledger_operations(ledger_path)
    ]

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
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..connectors import ConnectorOperation
from ..connectors._model import (
    ConnectorInvocation,
    ConnectorInvoke,
    ConnectorOutcomeUnknown,
    ConnectorResult,
    ConnectorTool,
)
from ..session._json import JsonObject
from ..session._tool_sources import SourceQuestion, SourceTaskStarted
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


def _object_schema(required: Sequence[str], **types: str) -> JsonObject:
    """An object's JSON Schema: each property of its JSON type, `required` given."""
    properties: JsonObject = {name: {"type": kind} for name, kind in types.items()}
    return {"type": "object", "properties": properties, "required": [*required]}


_ENTRY_SCHEMA = _object_schema(
    ["account", "amount"],
    account="string",
    amount="integer",
    fail_attempts="integer",
    uncertain="boolean",
)
_GATED_SCHEMA = _object_schema(
    ["account", "amount"], account="string", amount="integer", gate="string"
)
_SLOW_SCHEMA = _object_schema(["account"], account="string", seconds="number")
_ACCOUNT_SCHEMA = _object_schema(["account"], account="string")
_NO_INPUT: JsonObject = {"type": "object"}
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

    def record_entry(inv: ConnectorInvocation) -> None:
        ledger.record(
            "ledger_entry",
            call_id=inv.call_id,
            account=inv.arguments["account"],
            amount=inv.arguments["amount"],
            reference=inv.reference,
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
            record_entry(inv)
        if args.get("uncertain"):
            raise ConnectorOutcomeUnknown(
                "the ledger timed out after the write was sent"
            )
        return f"appended {args['amount']} to {args['account']}"

    async def transfer(inv: ConnectorInvocation) -> ConnectorResult:
        args = inv.arguments
        record_entry(inv)
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

    def op(
        name: str,
        description: str,
        input_schema: JsonObject,
        invoke: ConnectorInvoke,
        *,
        requires_approval: Callable[[JsonObject], bool] | None = None,
        step_timeout: timedelta = timeout,
        attempts: int = 3,
    ) -> ConnectorOperation:
        """Operation `name` of the kind and retry `FAKE_LEDGER_MANIFEST` reviews."""
        reviewed: Mapping[str, Any] = FAKE_LEDGER_MANIFEST["operations"][name]
        return ConnectorOperation(
            name=name,
            description=description,
            input_schema=input_schema,
            kind=reviewed["kind"],
            retry=reviewed.get("retry", "unsafe"),
            invoke=invoke,
            requires_approval=requires_approval,
            timeout=step_timeout,
            attempts=attempts,
        )

    return [
        op("read_balance", "Read an account's balance", _ACCOUNT_SCHEMA, read_balance),
        op(
            "append_entry",
            "Append an entry to an account",
            _ENTRY_SCHEMA,
            append_entry,
            requires_approval=large,
        ),
        op("transfer", "Transfer an amount to an account", _ENTRY_SCHEMA, transfer),
        op("start_export", "Export the ledger", _NO_INPUT, start_export),
        op("confirm_account", "Confirm an account", _ACCOUNT_SCHEMA, confirm_account),
        op("purge_ledger", "Delete every entry", _NO_INPUT, purge_ledger),
        op("start_import", "Import entries into the ledger", _NO_INPUT, start_import),
        op("post_payment", "Pay an amount to an account", _GATED_SCHEMA, post_payment),
        op("wire_funds", "Wire an amount to an account", _GATED_SCHEMA, wire_funds),
        op(
            "flaky_lookup",
            "Look an account up at a flaky provider",
            _ACCOUNT_SCHEMA,
            flaky_lookup,
            attempts=FLAKY_LOOKUP_ATTEMPTS,
        ),
        op(
            "slow_lookup",
            "Look an account up at a slow provider",
            _SLOW_SCHEMA,
            slow_lookup,
            step_timeout=SLOW_LOOKUP_TIMEOUT,
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
        op.bind(reference, manifest=manifest)
        for op in fake_ledger_operations(ledger_path, gate_dir=gate_dir)
    ]

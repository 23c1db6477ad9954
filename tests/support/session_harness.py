"""The ledger flow served by an in-process worker: the harness of the session tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest_asyncio
from temporalio.client import Client

from dex_agents.session import RunModelContext, ToolCallsRequested, TurnCompleted
from dex_agents.session._usage import Usage
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import Ledger, ScriptedRunner
from dex_agents.testing._ledger_flow import (
    LEDGER_INPUT_SCHEMAS,
    LedgerFlowConfig,
    ledger_flow,
    ledger_tools,
)
from support.gates import open_gate


@dataclass
class Harness:
    flow: AgentSessionFlow
    sessions: SessionClient
    store: SQLiteRuntimeStore
    ledger: Ledger
    gate_dir: Path
    config: LedgerFlowConfig

    def session_id(self) -> str:
        return f"session-{uuid.uuid4().hex[:8]}"

    def open_gate(self, name: str) -> None:
        open_gate(self.gate_dir, name)


def ledger_config(
    tmp_path: Path, flow_type: str, **overrides: object
) -> LedgerFlowConfig:
    """The ledger flow's config: its ledger and gates under `tmp_path`, `overrides` on top."""
    gate_dir = tmp_path / "gates"
    gate_dir.mkdir(parents=True, exist_ok=True)
    values: dict[str, object] = {
        "flow_type": flow_type,
        "ledger_path": str(tmp_path / "ledger.jsonl"),
        "gate_dir": str(gate_dir),
    }
    values.update(overrides)
    return LedgerFlowConfig(**values)  # pyright: ignore[reportArgumentType]


class LedgerSession(NamedTuple):
    """The ledger flow's parts for a test that runs its own worker (or none)."""

    config: LedgerFlowConfig
    flow: AgentSessionFlow
    store: SQLiteRuntimeStore
    sessions: SessionClient


def ledger_session(
    client: Client, tmp_path: Path, flow_type: str, **overrides: object
) -> LedgerSession:
    """The ledger flow of `ledger_config(tmp_path, flow_type, **overrides)`, its store and client."""
    config = ledger_config(tmp_path, flow_type, **overrides)
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    return LedgerSession(config, flow, store, SessionClient(client, flow, store))


class ApprovalWithoutWorker(NamedTuple):
    """A ledger session that waits on one approval, and no worker running."""

    flow: AgentSessionFlow
    store: SQLiteRuntimeStore
    sessions: SessionClient
    ledger: Ledger
    sid: str
    interrupt_id: str


async def approval_without_worker(
    client: Client, tmp_path: Path, flow_type: str, prefix: str, *, order_id: str
) -> ApprovalWithoutWorker:
    """Start session `prefix-…` that asks approval to refund `order_id`, then stop its worker.

    The worker stops once the session waits, so Temporal may still list it for
    a while. The store is `tmp_path / "runtime.sqlite"`; the caller closes it.
    """
    config, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    sid = f"{prefix}-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message=f'call create_refund {{"orderId": "{order_id}"}}'
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
    ledger = Ledger(config.ledger_path)
    return ApprovalWithoutWorker(
        flow, store, sessions, ledger, sid, interrupt.interrupt_id
    )


SPEND_LIMIT = 0.0015
"""The limit of `budget_paused_without_worker`'s session: its third turn reaches it."""


async def budget_paused_without_worker(
    client: Client, tmp_path: Path, flow_type: str, prefix: str
) -> ApprovalWithoutWorker:
    """Start session `prefix-…`, spend past `SPEND_LIMIT`, then stop its worker.

    The session waits on a spend-limit (`budget`) interrupt: two turns spend
    0.002 USD and the third is paused. The store is `tmp_path /
    "runtime.sqlite"`; the caller closes it.
    """
    config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, spend_limit=SPEND_LIMIT
    )
    sid = f"{prefix}-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.send_and_wait(sid, "say two")  # 0.002 USD spent
        snapshot = await sessions.send_and_wait(sid, "say three")
    (interrupt,) = snapshot.pending_interrupts
    assert (snapshot.status, interrupt.kind) == ("budget_reached", "budget")
    ledger = Ledger(config.ledger_path)
    return ApprovalWithoutWorker(
        flow, store, sessions, ledger, sid, interrupt.interrupt_id
    )


@dataclass(frozen=True)
class InProcessWorker:
    """A flow served by a worker in the test process, on its own SQLite store."""

    flow: AgentSessionFlow
    store: SQLiteRuntimeStore
    sessions: SessionClient


@asynccontextmanager
async def in_process_worker(
    client: Client, flow: AgentSessionFlow, store_path: Path
) -> AsyncIterator[InProcessWorker]:
    """Serve `flow` from this process until the block ends, then close the store."""
    store = SQLiteRuntimeStore(store_path)
    try:
        async with create_worker(client, [flow], store=store):
            yield InProcessWorker(flow, store, SessionClient(client, flow, store))
    finally:
        await store.close()


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def harness(
    client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[Harness]:
    """A ledger flow with an in-process worker and its own store."""
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    async with in_process_worker(client, flow, tmp_path / "runtime.sqlite") as served:
        yield Harness(
            flow=flow,
            sessions=served.sessions,
            store=served.store,
            ledger=Ledger(config.ledger_path),
            gate_dir=Path(config.gate_dir),
            config=config,
        )


async def waiting_interrupt(harness: Harness, sid: str, script: str) -> str:
    """Start `sid` with `script` and return the ID of the one interrupt it waits on."""
    await harness.sessions.start(sid, initial_message=script)
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    return interrupt.interrupt_id


class RecordingRunner(ScriptedRunner):
    """The ledger flow's scripted runner that records every `run_model` attempt.

    With `distinct_usage`, each successful segment reports its own usage (every
    field grows with the segment's number n), so a sum can only come out right
    if every segment is counted exactly once. Costs are multiples of 1/8, exact in
    binary floating point, so sums compare exactly whatever the order of addition.
    """

    def __init__(self, config: LedgerFlowConfig, *, distinct_usage: bool = False):
        gate_dir = Path(config.gate_dir)
        super().__init__(
            ledger_tools(Ledger(config.ledger_path), gate_dir),
            input_schemas=LEDGER_INPUT_SCHEMAS,
            gate_dir=gate_dir,
        )
        self.distinct_usage = distinct_usage
        self.attempts: list[tuple[str, int]] = []
        self.segment_usage: dict[str, Usage] = {}
        """Usage each successful segment reported, by step execution ID."""

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        self.attempts.append((context.step_execution_id, context.attempt))
        result = await super().run_model(context)
        usage = result.usage
        if self.distinct_usage:
            n = len(self.segment_usage) + 1
            usage = Usage(
                input_tokens=100 * n + 1,
                output_tokens=10 * n + 3,
                cached_input_tokens=7 * n,
                reasoning_tokens=n,
                model_calls=n,
                cost_usd=0.125 * n,
            )
            result = replace(result, usage=usage)
        self.segment_usage[context.step_execution_id] = usage
        return result


def flow_around(
    tmp_path: Path, flow_type: str, runner: ScriptedRunner, **options: Any
) -> AgentSessionFlow:
    """The ledger flow's options (with `options` changed) around `runner`."""
    base = ledger_flow(ledger_config(tmp_path, flow_type))
    return create_agent_session_flow(
        runner, flow_type, replace(base.options, **options)
    )

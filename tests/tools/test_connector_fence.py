"""A connector call keeps its fence marker in the tool Step's heartbeat checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import SessionError
from dex_agents.connectors import (
    ConnectorOperation,
    ConnectorToolSource,
)
from dex_agents.connectors._model import (
    ConnectorFence,
    ConnectorInvocation,
    ConnectorResult,
    ConnectorRetry,
    connector_call_id,
)
from dex_agents.session import ToolCall
from dex_agents.session._json import JsonObject, JsonValue
from dex_agents.testing import Ledger
from support.connector_agent import connector_agent
from support.tools_harness import deferred_execution, start_to_idle

_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}, "fail_attempts": {"type": "integer"}},
    "required": ["amount"],
}


def _charge_source(ledger: Ledger, retry: ConnectorRetry) -> ConnectorToolSource:
    """`charge` records the fence each attempt was handed; it fails its first attempts."""

    async def invoke(inv: ConnectorInvocation) -> ConnectorResult:
        fence = inv.earlier_fence
        ledger.record(
            "charge_attempt",
            attempt=inv.attempt,
            call_id=inv.call_id,
            earlier_fence=None
            if fence is None
            else {"call_id": fence.call_id, "attempt": fence.attempt},
        )
        if inv.attempt <= int(str(inv.arguments.get("fail_attempts", 0))):
            raise ConnectionError(f"provider unavailable (attempt {inv.attempt})")
        return f"charged {inv.arguments['amount']}"

    operation = ConnectorOperation(
        name="charge",
        description="Charge the card.",
        input_schema=_SCHEMA,
        kind="mutation",
        retry=retry,
        invoke=invoke,
    )
    manifest = {"operations": {"charge": {"approval": "never"}}}
    return ConnectorToolSource([operation.bind("card-1", manifest=manifest)])


async def _charge_call(
    tmp_path: Path, retry: ConnectorRetry
) -> tuple[Ledger, ConnectorToolSource, ToolCall]:
    """A fresh ledger, its `charge` source, and the built call `t1` of `charge 5`."""
    ledger = Ledger(tmp_path / "l.jsonl")
    source = _charge_source(ledger, retry)
    built = await source.build_call("charge", {"amount": 5})
    call = ToolCall(
        tool_call_id="t1",
        tool_name="charge",
        arguments=built.arguments,
        policy=built.policy,
    )
    return ledger, source, call


def _first_fence() -> ConnectorFence:
    """The fence attempt 1 of call `t1` leaves."""
    call_id = connector_call_id(deferred_execution(1))
    return ConnectorFence(call_id=call_id, operation="charge", attempt=1)


async def test_an_attempt_leaves_its_fence_and_the_next_attempt_receives_it(
    tmp_path: Path,
) -> None:
    ledger, source, call = await _charge_call(tmp_path, "safe")
    first: list[JsonValue] = []
    await source.execute_deferred_tool_call(call, deferred_execution(1, recorded=first))
    fence = _first_fence()
    call_id = fence.call_id
    assert first == [fence.to_checkpoint()]

    second: list[JsonValue] = []
    await source.execute_deferred_tool_call(
        call, deferred_execution(2, checkpoint=first[-1], recorded=second)
    )
    assert [a["earlier_fence"] for a in ledger.entries("charge_attempt")] == [
        None,
        {"call_id": call_id, "attempt": 1},
    ]
    assert ConnectorFence.from_checkpoint(second[-1]) == ConnectorFence(
        call_id=call_id, operation="charge", attempt=2
    )


async def test_a_fence_of_another_call_or_a_foreign_checkpoint_is_ignored(
    tmp_path: Path,
) -> None:
    ledger, source, call = await _charge_call(tmp_path, "unsafe")
    other = ConnectorFence(call_id="dexcall_other", operation="charge", attempt=1)
    await source.execute_deferred_tool_call(
        call, deferred_execution(2, checkpoint=other.to_checkpoint(), recorded=[])
    )
    await source.execute_deferred_tool_call(
        call, deferred_execution(2, checkpoint={"app": 1}, recorded=[])
    )
    assert [a["earlier_fence"] for a in ledger.entries("charge_attempt")] == [None] * 2


async def test_a_retry_unsafe_mutation_with_an_earlier_fence_never_runs_again(
    tmp_path: Path,
) -> None:
    ledger, source, call = await _charge_call(tmp_path, "unsafe")
    with pytest.raises(SessionError, match="outcome unknown") as caught:
        await source.execute_deferred_tool_call(
            call,
            deferred_execution(
                2, checkpoint=_first_fence().to_checkpoint(), recorded=[]
            ),
        )
    assert not caught.value.retryable
    assert ledger.count("charge_attempt") == 0


async def test_a_retried_connector_step_hands_each_attempt_the_earlier_fence(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "charges.jsonl")
    source = _charge_source(ledger, "safe")
    async with connector_agent(client, flow_type, tmp_path, sources=[source]) as rig:
        snap = await start_to_idle(
            rig.sessions,
            "fenced",
            'dex-script: call charge {"amount": 5, "fail_attempts": 2}',
        )
        assert snap.turns[0].tool_calls[0].status == "finished"
    attempts = ledger.entries("charge_attempt")
    (call_id,) = {str(a["call_id"]) for a in attempts}
    assert [a["earlier_fence"] for a in attempts] == [
        None,
        {"call_id": call_id, "attempt": 1},
        {"call_id": call_id, "attempt": 2},
    ]

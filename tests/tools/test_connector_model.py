"""The connector model and tool-source name rules, without an engine."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, tool

from dex_agents.claude import ClaudeAgentDefinition
from dex_agents.connectors import ConnectorToolSource
from dex_agents.session._tool_sources import (
    SourceCallRefused,
    SourceTool,
    ToolSourceContext,
)
from dex_agents.testing._fake_ledger_connector import (
    FAKE_LEDGER_MANIFEST,
    fake_ledger_connector_tools,
    fake_ledger_operations,
)
from support.tools_harness import deferred_execution

_CONTEXT = ToolSourceContext(session_id="s", turn_id="turn-1", attempt=1)


def _source(tmp_path: Path) -> ConnectorToolSource:
    return ConnectorToolSource(fake_ledger_connector_tools(str(tmp_path / "l.jsonl")))


def test_the_manifest_decides_what_is_offered(tmp_path: Path) -> None:
    source = _source(tmp_path)
    names = [t.name for t in asyncio.run(source.list_tools(_CONTEXT))]
    assert "purge_ledger" not in names
    assert list(source.declared_tool_names) == names
    with pytest.raises(SourceCallRefused):
        asyncio.run(source.build_call("purge_ledger", {}))


def test_the_manifest_decides_effect_and_approval(tmp_path: Path) -> None:
    source = _source(tmp_path)
    query = asyncio.run(source.build_call("read_balance", {"account": "a"}))
    assert (query.policy.effect, query.policy.needs_approval) == ("read", False)
    small = asyncio.run(
        source.build_call("append_entry", {"account": "a", "amount": 5})
    )
    assert (small.policy.effect, small.policy.needs_approval) == (
        "idempotent_write",
        False,
    )
    large = asyncio.run(
        source.build_call("append_entry", {"account": "a", "amount": 500})
    )
    assert large.policy.needs_approval
    unsafe = asyncio.run(source.build_call("transfer", {"account": "a", "amount": 1}))
    assert unsafe.policy.effect == "non_idempotent_write"


def test_bad_arguments_are_refused_before_the_step(tmp_path: Path) -> None:
    with pytest.raises(SourceCallRefused, match="required property"):
        asyncio.run(_source(tmp_path).build_call("transfer", {"account": "a"}))


def test_an_input_validator_is_applied(tmp_path: Path) -> None:
    (op,) = [
        o for o in fake_ledger_operations(str(tmp_path / "l")) if o.name == "transfer"
    ]

    def positive(args: Any) -> None:
        if args["amount"] <= 0:
            raise ValueError("amount must be positive")

    source = ConnectorToolSource(
        [op.bind("r", manifest=FAKE_LEDGER_MANIFEST, input_validator=positive)]
    )
    with pytest.raises(SourceCallRefused, match="positive"):
        asyncio.run(source.build_call("transfer", {"account": "a", "amount": 0}))


def test_a_manifest_that_disagrees_with_the_code_is_refused(tmp_path: Path) -> None:
    (op,) = [
        o for o in fake_ledger_operations(str(tmp_path / "l")) if o.name == "transfer"
    ]
    manifest = {"operations": {"transfer": {"kind": "mutation", "retry": "safe"}}}
    with pytest.raises(TypeError, match="retry"):
        op.bind("r", manifest=manifest)


def test_step_options_follow_the_operation(tmp_path: Path) -> None:
    source = _source(tmp_path)
    safe = source.tool_call_step_options("append_entry")
    unsafe = source.tool_call_step_options("transfer")
    assert (safe.attempts, unsafe.attempts) == (3, None)
    assert safe.timeout is not None


def test_the_call_id_comes_from_the_step_execution_id(tmp_path: Path) -> None:
    source = _source(tmp_path)
    call = asyncio.run(source.build_call("read_balance", {"account": "a"}))
    from dex_agents.session import ToolCall

    tool_call = ToolCall(
        tool_call_id="t1",
        tool_name="read_balance",
        arguments=call.arguments,
        policy=call.policy,
    )
    ids = set()
    for attempt in (1, 2):
        execution = deferred_execution(attempt, idempotency_key="k")
        asyncio.run(source.execute_deferred_tool_call(tool_call, execution))
    from dex_agents.testing import Ledger

    ids = {
        str(e["call_id"]) for e in Ledger(tmp_path / "l.jsonl").entries("ledger_query")
    }
    assert len(ids) == 1


class _Named:
    def __init__(self, name: str, tools: Sequence[str]) -> None:
        self.source_name = name
        self.declared_tool_names = tools

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        return []

    async def build_call(self, tool_name: str, arguments: Any) -> Any: ...

    async def execute_deferred_tool_call(self, call: Any, execution: Any) -> Any: ...

    def tool_call_step_options(self, tool_name: str) -> Any: ...


@tool("lookup", "Look up", {"id": str})
async def _lookup(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": []}


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([_Named("a", []), _Named("a", [])], "two tool sources"),
        ([_Named("a", ["lookup"])], "already a custom or built-in"),
        ([_Named("a", ["Bash"])], "already a custom or built-in"),
        ([_Named("a", ["x"]), _Named("b", ["x"])], "both declare"),
    ],
)
def test_name_collisions_are_refused_at_definition(
    sources: list[_Named], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(),
            custom_tools=[_lookup],
            tool_sources=sources,  # pyright: ignore[reportArgumentType]
        )


class _Listing(_Named):
    def __init__(self, name: str, listed: Sequence[str] | None) -> None:
        super().__init__(name, [])
        self._listed = listed

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        if self._listed is None:
            await asyncio.sleep(5)
            return []
        return [
            SourceTool(name=n, description="d", input_schema={"type": "object"})
            for n in self._listed
        ]


def _run_context() -> Any:
    from dex_agents.session import RunModelContext

    return RunModelContext(
        session_id="s",
        flow_type="F",
        turn_id="turn-1",
        step_execution_id="x",
        attempt=1,
        pending=(),
        transcript=None,  # pyright: ignore[reportArgumentType]
        events=None,  # pyright: ignore[reportArgumentType]
        tool_policies={},
        default_tool_effect="unclassified",
    )


def test_listing_collisions_fail_the_attempt_and_a_slow_source_offers_nothing() -> None:
    from datetime import timedelta

    from dex_agents.claude._sources import segment_tools

    async def tools(*sources: _Listing) -> list[str]:
        served = await segment_tools(
            context=_run_context(),
            custom={},
            sources=sources,  # pyright: ignore[reportArgumentType]
            timeout=timedelta(seconds=0.2),
        )
        return list(served)

    assert asyncio.run(tools(_Listing("a", ["x"]), _Listing("b", None))) == ["x"]
    with pytest.raises(TypeError, match="both list"):
        asyncio.run(tools(_Listing("a", ["x"]), _Listing("b", ["x"])))
    with pytest.raises(TypeError, match="Claude Code tool"):
        asyncio.run(tools(_Listing("a", ["Bash"])))

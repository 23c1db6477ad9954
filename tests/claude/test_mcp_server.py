from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ResultMessage,
    ToolAnnotations,
    tool,
)

# The SDK's own bridge, so the server is exercised exactly as a query serves it.
from claude_agent_sdk._internal.sdk_mcp_bridge import SdkMcpBridge

from dex_agents import AgentSessionOptions
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._gate import Decision, ToolCallGate
from dex_agents.claude._mcp_server import (
    build_custom_tool_server,
    serve_call,
    tool_use_id_of,
)
from dex_agents.claude._tools import CustomTool
from dex_agents.session import (
    current_deferred_tool_execution,
)
from dex_agents.session._records import ToolRecord
from dex_agents.session._tool_sources import SourceTool, ToolSourceContext
from dex_agents.temporal import SessionClient
from dex_agents.temporal._snapshot import AgentSnapshot
from support.claude_harness import (
    SessionDriver,
    fake_options,
)
from support.cli_argv_recorder import recorded_runs, recording_cli
from support.custom_tools_agent import audit_rig
from support.fake_suite_rig import SuiteEnv
from support.gate_rig import CliSide, ScriptedCli, completed

runs: list[dict[str, Any]] = []


@tool("lookup", "Look up", {"id": str}, annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(args: dict[str, Any]) -> dict[str, Any]:
    runs.append(args)
    assert current_deferred_tool_execution() is None
    if args["id"] == "boom":
        raise RuntimeError("lookup failed")
    return {"content": [{"type": "text", "text": f"found {args['id']}"}]}


@tool("refund", "Refund", {"id": str})
async def refund(args: dict[str, Any]) -> dict[str, Any]:
    runs.append(args)
    return {"content": [{"type": "text", "text": "refunded"}]}


TOOLS = {t.name: CustomTool.from_sdk(t) for t in (lookup, refund)}


def text(result: Any) -> tuple[str, bool]:
    return "".join(b.text for b in result.content), bool(result.is_error)


async def serve(
    gate: ToolCallGate, name: str, args: dict[str, Any], call_id: str | None
) -> tuple[str, bool]:
    return text(
        await serve_call(
            TOOLS, gate, tool_name=name, arguments=args, tool_use_id=call_id
        )
    )


def lookup_allowed(call_id: str) -> ToolCallGate:
    """A fresh gate that allows lookup under `call_id`; no lookup has run yet."""
    runs.clear()
    gate = ToolCallGate()
    gate.decide(
        call_id,
        Decision(kind="allow", tool_name="mcp__tools__lookup", custom_name="lookup"),
    )
    return gate


async def test_inline_calls_run_under_their_decision_only() -> None:
    gate = lookup_allowed("a")
    assert await serve(gate, "lookup", {"id": "7"}, "a") == ("found 7", False)
    assert (await serve(gate, "refund", {"id": "7"}, "a"))[1] is True
    assert (await serve(gate, "lookup", {"id": "7"}, "other"))[1] is True
    assert (await serve(gate, "lookup", {"id": "7"}, None))[1] is True
    assert runs == [{"id": "7"}]


async def test_schema_mismatch_and_handler_errors_are_results() -> None:
    gate = lookup_allowed("a")
    assert await serve(gate, "lookup", {"id": 7}, "a") == (
        "Input validation error: 7 is not of type 'string'",
        True,
    )
    assert await serve(gate, "lookup", {"id": "boom"}, "a") == ("lookup failed", True)
    assert runs == [{"id": "boom"}]


async def test_replays_return_the_record_once_without_running() -> None:
    runs.clear()
    gate = ToolCallGate()
    record = ToolRecord(
        tool_call_id="p",
        tool_name="refund",
        arguments={"id": "1"},
        status="rejected",
        rejection_message="no",
    )
    gate.decide(
        "p",
        Decision(
            kind="replay",
            tool_name="mcp__tools__refund",
            custom_name="refund",
            record=record,
        ),
    )
    assert await serve(gate, "refund", {"id": "changed"}, "p") == (
        "The user rejected this call: no",
        True,
    )
    assert (await serve(gate, "refund", {"id": "1"}, "p"))[1] is True
    finished = ToolRecord(
        tool_call_id="q",
        tool_name="refund",
        arguments={},
        status="finished",
        output="done",
    )
    gate.decide(
        "q",
        Decision(
            kind="replay",
            tool_name="mcp__tools__refund",
            custom_name="refund",
            record=finished,
        ),
    )
    assert await serve(gate, "refund", {}, "q") == ("done", False)
    assert runs == []


def test_tool_use_id_of() -> None:
    assert tool_use_id_of({"claudecode/toolUseId": "t", "progress_token": 1}) == "t"
    assert tool_use_id_of({"claudecode/toolUseId": 3}) is None
    assert tool_use_id_of(None) is None


async def test_the_server_sees_the_tool_use_id_through_the_sdk_bridge() -> None:
    gate = lookup_allowed("toolu_1")
    config = build_custom_tool_server("tools", TOOLS, gate)
    assert config["type"] == "sdk" and config["name"] == "tools"
    bridge = SdkMcpBridge("tools", config["instance"])
    try:
        init = await bridge.handle(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-code", "version": "2.1.327"},
                },
            }
        )
        assert init is not None and "result" in init
        listed = await bridge.handle(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        assert listed is not None
        tools = listed["result"]["tools"]
        assert [t["name"] for t in tools] == ["lookup", "refund"]
        assert tools[0]["annotations"] == {"readOnlyHint": True}
        called = await bridge.handle(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "lookup",
                    "arguments": {"id": "7"},
                    "_meta": {"claudecode/toolUseId": "toolu_1", "progressToken": 2},
                },
            }
        )
        assert called is not None
        assert called["result"]["content"] == [{"type": "text", "text": "found 7"}]
        assert runs == [{"id": "7"}]
    finally:
        await bridge.aclose()


class AuditSource:
    """A tool source whose listing the test chooses; it declares no names up front,
    so only the run-time listing can collide."""

    def __init__(
        self,
        name: str,
        listed: Sequence[SourceTool],
        declared: Sequence[str] = (),
    ) -> None:
        self.source_name = name
        self.declared_tool_names = list(declared)
        self._listed = list(listed)

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        del context
        return list(self._listed)

    async def build_call(self, tool_name: str, arguments: Any) -> Any:
        raise AssertionError("no source call is made in these tests")

    async def execute_deferred_tool_call(self, call: Any, execution: Any) -> Any:
        raise AssertionError("no source call is made in these tests")

    def tool_call_step_options(self, tool_name: str) -> Any:
        raise AssertionError("no source call is made in these tests")


@tool(
    "audit_lookup",
    "Look up an order (audit)",
    {"orderId": str},
    annotations=ToolAnnotations(readOnlyHint=True),
)
async def audit_lookup(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"order {args['orderId']}"}]}


@tool("audit_refund", "Refund an order (audit)", {"orderId": str})
async def audit_refund(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"refunded {args['orderId']}"}]}


async def test_row98_a_listing_that_repeats_a_custom_tool_name_fails_the_attempt(
    tmp_path: Path,
) -> None:
    """Row 98: a run-time listing naming a custom tool fails the RunModel attempt
    (the source declared nothing, so the definition could not refuse it)."""
    listed = [
        SourceTool(
            name="audit_lookup",
            description="shadows the custom tool",
            input_schema={"type": "object"},
        )
    ]
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(tmp_path),
            custom_tools=[audit_lookup],
            tool_sources=[AuditSource("audit-src", listed)],
        )
    )
    driver = SessionDriver(runner, session_id="audit-row98")
    with pytest.raises(TypeError, match="'audit_lookup', which is a custom"):
        await driver.turn('dex-script: call audit_lookup {"orderId": "1"}')
    # The attempt failed before any CLI ran: nothing reached the model.
    assert driver.sink.events == []


def test_row101_the_default_listing_timeout_is_ten_seconds() -> None:
    """Row 101: `tool_source_listing_timeout` is 10 s unless the definition says."""
    definition = ClaudeAgentDefinition(options=ClaudeAgentOptions())
    assert definition.tool_source_listing_timeout == timedelta(seconds=10)


async def test_rows41_88_96_source_tools_follow_the_custom_tools_without_annotations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Rows 41/88/96: the custom tool server lists the custom tools, then the
    source's tools with the source's description and JSON Schema and no MCP
    annotations (so the CLI runs them one at a time)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"account": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["account"],
    }
    listed = [
        SourceTool(
            name="audit_transfer",
            description="Move money (source)",
            input_schema=schema,
        ),
        SourceTool(
            name="audit_balance",
            description="Read a balance (source)",
            input_schema={"type": "object"},
        ),
    ]
    served: list[Any] = []

    async def list_and_finish(cli: CliSide) -> ResultMessage:
        served.extend((await cli.client.list_tools()).tools)
        return completed("listed")

    ScriptedCli(monkeypatch, list_and_finish)
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(tmp_path),
            custom_tools=[audit_refund, audit_lookup],
            tool_sources=[AuditSource("audit-ledger", listed)],
        )
    )
    result = await SessionDriver(runner, session_id="audit-rows41").turn("list")
    assert result.text == "listed"
    assert [t.name for t in served] == [
        "audit_refund",
        "audit_lookup",
        "audit_transfer",
        "audit_balance",
    ]
    by_name = {t.name: t for t in served}
    transfer = by_name["audit_transfer"]
    assert (transfer.description, transfer.input_schema) == (
        "Move money (source)",
        schema,
    )
    assert by_name["audit_balance"].description == "Read a balance (source)"
    for name in ("audit_transfer", "audit_balance"):
        assert by_name[name].annotations is None, by_name[name]
    # The custom read keeps its annotation: the check above can tell them apart.
    lookup = by_name["audit_lookup"].annotations
    assert lookup is not None and lookup.read_only_hint is True


async def test_a_renamed_custom_tool_server_serves_prefixed_names_but_keeps_bare_ones(
    suite: SuiteEnv,
) -> None:
    """`custom_tool_server_name="audit_srv"`: the CLI calls `mcp__audit_srv__<tool>`,
    while the policies (by bare name), interrupts, records and events name the
    tools bare."""
    script, log = recording_cli(suite.tmp_path)
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(),
        server_name="audit_srv",
        cli_path=script,
    ) as rig:
        sid = "audit-renamed-server"
        await rig.sessions.start(
            sid,
            initial_message="dex-script: call mcp__audit_srv__audit_lookup "
            '{"orderId": "3"}',
        )
        snap = await rig.sessions.wait_for_idle(sid)
        # The bare-name read policy let it run inline, with no record.
        assert snap.turns[0].status == "completed"
        assert snap.turns[0].final_text == "done: order 3: arrived broken"
        assert snap.turns[0].tool_calls == []
        assert rig.ledger.count("audit_lookup") == 1

        await rig.sessions.send_user_message(
            sid, 'dex-script: call mcp__audit_srv__audit_refund {"orderId": "4"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        (interrupt,) = snap.pending_interrupts
        # The bare-name write policy applies (unclassified would be the default).
        assert (interrupt.tool_name, interrupt.effect) == (
            "audit_refund",
            "non_idempotent_write",
        )
        snap = await _approve(rig.sessions, sid, interrupt.interrupt_id)
        assert snap.turns[1].final_text == "done: refunded order 4"
        (record,) = snap.turns[1].tool_calls
        assert (record.tool_name, record.status) == ("audit_refund", "finished")
        assert rig.ledger.count("audit_refund") == 1

        events = await rig.sessions.events(sid)
        started = [e.data["tool_name"] for e in events if e.type == "tool_call_started"]
        assert set(started) == {"audit_lookup", "audit_refund"}, started
        # The CLI got the server under its name.
        configs = [
            argv[argv.index("--mcp-config") + 1]
            for argv in recorded_runs(log)
            if "--mcp-config" in argv
        ]
        assert configs and all('"audit_srv"' in c for c in configs), configs
        assert not any('"tools"' in c for c in configs), configs


async def test_a_renamed_server_prefix_in_allowed_tools_is_refused_for_a_deferring_tool(
    suite: SuiteEnv,
) -> None:
    """An `allowed_tools` entry `mcp__audit_srv__audit_refund` (a write by its
    bare-name policy) fails the turn with an error naming the option; nothing runs.

    The session's default effect is read, so only resolving the renamed prefix to
    the custom tool (and its policy) refuses the entry: a check that missed the
    prefix would resolve the name as an unknown tool, a read, and let it pass.
    """
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(default_tool_effect="read"),
        server_name="audit_srv",
        allowed_tools=["mcp__audit_srv__audit_refund"],
    ) as rig:
        sid = "audit-renamed-server-allowed-tools"
        await rig.sessions.start(
            sid, initial_message='dex-script: call audit_refund {"orderId": "5"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        turn = snap.turns[0]
        assert turn.status == "failed"
        assert "`allowed_tools` lists 'mcp__audit_srv__audit_refund'" in (
            turn.error or ""
        )
        assert snap.pending_interrupts == []
        assert rig.ledger.count("audit_refund") == 0


async def _approve(
    sessions: SessionClient, sid: str, interrupt_id: str
) -> AgentSnapshot:
    assert await sessions.resolve_interrupt(sid, interrupt_id, approved=True)
    return await sessions.wait_for_idle(sid)

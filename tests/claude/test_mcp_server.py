from typing import Any

from claude_agent_sdk import ToolAnnotations, tool

# The SDK's own bridge, so the server is exercised exactly as a query serves it.
from claude_agent_sdk._internal.sdk_mcp_bridge import SdkMcpBridge

from dex_agents.claude._gate import Decision, ToolCallGate
from dex_agents.claude._mcp_server import (
    build_custom_tool_server,
    serve_call,
    tool_use_id_of,
)
from dex_agents.claude._tools import CustomTool
from dex_agents.session import current_deferred_tool_execution
from dex_agents.session._records import ToolRecord

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


async def test_inline_calls_run_under_their_decision_only() -> None:
    runs.clear()
    gate = ToolCallGate()
    gate.decide(
        "a",
        Decision(kind="allow", tool_name="mcp__tools__lookup", custom_name="lookup"),
    )
    assert await serve(gate, "lookup", {"id": "7"}, "a") == ("found 7", False)
    assert (await serve(gate, "refund", {"id": "7"}, "a"))[1] is True
    assert (await serve(gate, "lookup", {"id": "7"}, "other"))[1] is True
    assert (await serve(gate, "lookup", {"id": "7"}, None))[1] is True
    assert runs == [{"id": "7"}]


async def test_schema_mismatch_and_handler_errors_are_results() -> None:
    runs.clear()
    gate = ToolCallGate()
    gate.decide(
        "a",
        Decision(kind="allow", tool_name="mcp__tools__lookup", custom_name="lookup"),
    )
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
    runs.clear()
    gate = ToolCallGate()
    gate.decide(
        "toolu_1",
        Decision(kind="allow", tool_name="mcp__tools__lookup", custom_name="lookup"),
    )
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

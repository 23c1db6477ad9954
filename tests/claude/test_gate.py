import pytest

from dex_agents.claude._gate import Decision, ToolCallGate
from dex_agents.session import ToolCall, ToolPolicy
from dex_agents.session._records import ToolRecord

RECORD = ToolRecord(
    tool_call_id="t1", tool_name="refund", arguments={"id": 1}, status="finished"
)


def call(tool_use_id: str) -> ToolCall:
    return ToolCall(
        tool_call_id=tool_use_id,
        tool_name="refund",
        arguments={},
        policy=ToolPolicy(effect="non_idempotent_write"),
    )


def test_one_decision_per_tool_use_id() -> None:
    gate = ToolCallGate()
    allow = Decision(kind="allow", tool_name="mcp__tools__lookup", custom_name="lookup")
    assert gate.decide("t1", allow)
    assert not gate.decide("t1", Decision(kind="deny", tool_name="x"))
    assert gate.decision("t1") == allow
    defer = Decision(kind="defer", tool_name="mcp__tools__refund")
    assert not gate.defer("t1", defer, call("t1"))
    assert gate.deferral is None


def test_one_deferral_per_segment() -> None:
    gate = ToolCallGate()
    defer = Decision(kind="defer", tool_name="mcp__tools__refund", custom_name="refund")
    assert gate.defer("t1", defer, call("t1"))
    assert not gate.defer("t2", defer, call("t2"))
    assert gate.decision("t2") is None
    deferral = gate.deferral
    assert deferral is not None and deferral.tool_use_id == "t1"
    assert gate.decisions() == {"t1": defer}


def test_deferral_shapes_are_checked() -> None:
    gate = ToolCallGate()
    with pytest.raises(ValueError, match="use `defer`"):
        gate.decide("t1", Decision(kind="defer", tool_name="x"))
    with pytest.raises(ValueError, match="own call"):
        gate.defer("t1", Decision(kind="defer", tool_name="x"), call("t2"))
    with pytest.raises(ValueError, match="own call"):
        gate.defer("t1", Decision(kind="allow", tool_name="x"), call("t1"))


def test_served_calls_need_the_permitted_id_and_name() -> None:
    gate = ToolCallGate()
    gate.decide(
        "a",
        Decision(kind="allow", tool_name="mcp__tools__lookup", custom_name="lookup"),
    )
    gate.decide("b", Decision(kind="allow", tool_name="Bash"))
    gate.decide(
        "d", Decision(kind="deny", tool_name="mcp__tools__lookup", custom_name="lookup")
    )
    assert gate.permit_served_call("a", "lookup") is not None
    assert (
        gate.permit_served_call("a", "lookup") is not None
    )  # an inline call may repeat
    assert gate.permit_served_call("a", "refund") is None
    assert gate.permit_served_call("b", "Bash") is None
    assert gate.permit_served_call("d", "lookup") is None
    assert gate.permit_served_call("unknown", "lookup") is None


def test_a_replay_is_served_once_as_its_own_tool() -> None:
    gate = ToolCallGate()
    replay = Decision(
        kind="replay",
        tool_name="mcp__tools__refund",
        custom_name="refund",
        record=RECORD,
    )
    gate.decide("t1", replay)
    assert gate.permit_served_call("t1", "lookup") is None
    assert gate.permit_served_call("t1", "refund") == replay
    assert gate.permit_served_call("t1", "refund") is None


def test_an_ask_is_answered_once() -> None:
    gate = ToolCallGate()
    ask = Decision(kind="ask", tool_name="Bash", record=RECORD)
    gate.decide("t1", ask)
    gate.decide("t2", Decision(kind="allow", tool_name="Bash"))
    assert gate.take_ask("t2") is None
    assert gate.take_ask("t1") == ask
    assert gate.take_ask("t1") is None

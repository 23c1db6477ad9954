"""Segment behavior that needs no CLI: resume checks and live events."""

from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    StreamEvent,
    ToolResultBlock,
    UserMessage,
)

from dex_agents._errors import SessionError
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._gate import Decision
from dex_agents.claude._segment import Segment, SegmentSetup, answered_tool_use_ids
from dex_agents.claude._transcript import transcript_item
from dex_agents.session import StoredMessage
from dex_agents.session._json import JsonObject
from dex_agents.session._records import ToolRecord
from dex_agents.session._runner import ResumeState
from support.claude_harness import SessionDriver

OPTIONS = ClaudeAgentOptions(cli_path="/nonexistent/claude")
RECORD = ToolRecord(
    tool_call_id="t1", tool_name="refund", arguments={}, status="finished"
)


def driver() -> SessionDriver:
    return SessionDriver(ClaudeAgentRunner(ClaudeAgentDefinition(options=OPTIONS)))


def tool_result_entry(call_id: str) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": "x"}
            ],
        },
    }


def segment(
    run_state: JsonObject, records: tuple[ToolRecord, ...], entries: list[Any]
) -> Segment:
    d = driver()
    messages = (
        StoredMessage(role="tool", text="", item=transcript_item("s", entries)),
    )
    resume = ResumeState(run_state=run_state, messages=messages, records=records)
    context = d.context(turn_id="turn-1", step=2, pending=(), resume=resume)
    setup = SegmentSetup(
        options=OPTIONS, tools={}, server_name="tools", policies={}, permission=None
    )
    return Segment(setup, context)


STATE: JsonObject = {
    "session_id": "s",
    "cwd": "/",
    "deferred": {
        "tool_use_id": "t1",
        "kind": "custom",
        "tool_name": "mcp__tools__refund",
    },
}


@pytest.mark.parametrize(
    ("run_state", "records", "entries", "message"),
    [
        ({"cwd": "/"}, (RECORD,), [], "session_id"),
        (
            {"session_id": "s", "cwd": "/"},
            (RECORD,),
            [],
            "deferred call in its run state",
        ),
        (STATE, (), [], "without a final record"),
        (STATE, (RECORD,), [tool_result_entry("t1")], "already has a result"),
    ],
)
async def test_resume_checks_fail_before_the_cli_starts(
    run_state: JsonObject,
    records: tuple[ToolRecord, ...],
    entries: list[Any],
    message: str,
) -> None:
    with pytest.raises(SessionError, match=message) as raised:
        await segment(run_state, records, entries).run()
    assert not raised.value.retryable


async def test_a_new_segment_needs_a_prompt() -> None:
    d = driver()
    with pytest.raises(SessionError, match="no prompt"):
        await d.runner.run_model(
            d.context(turn_id="t", step=1, pending=(), resume=None)
        )


def test_answered_ids() -> None:
    entries: list[Any] = [
        tool_result_entry("a"),
        {"type": "user", "message": {"role": "user", "content": "text"}},
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "no"}]},
        },
        {"type": "user"},
    ]
    assert answered_tool_use_ids(entries) == frozenset({"a"})


def stream_delta(delta: dict[str, Any], parent: str | None = None) -> StreamEvent:
    return StreamEvent(
        uuid="u",
        session_id="s",
        parent_tool_use_id=parent,
        event={"type": "content_block_delta", "index": 0, "delta": delta},
    )


def test_main_conversation_deltas_and_inline_results_become_events() -> None:
    d = driver()
    context = d.context(turn_id="t", step=1, pending=(), resume=None)
    setup = SegmentSetup(
        options=OPTIONS, tools={}, server_name="tools", policies={}, permission=None
    )
    seg = Segment(setup, context)
    seg._gate.decide("inline", Decision(kind="allow", tool_name="Read"))
    seg._gate.decide("denied", Decision(kind="deny", tool_name="Bash"))
    for message in [
        stream_delta({"type": "text_delta", "text": "hel"}),
        stream_delta({"type": "thinking_delta", "thinking": "hmm"}),
        stream_delta({"type": "text_delta", "text": "sub"}, parent="agent"),
        stream_delta({"type": "input_json_delta", "partial_json": "{"}),
        UserMessage(
            content=[
                ToolResultBlock(
                    tool_use_id="inline", content=[{"type": "text", "text": "file"}]
                ),
                ToolResultBlock(tool_use_id="denied", content="no", is_error=True),
                ToolResultBlock(tool_use_id="unknown", content="?"),
            ]
        ),
    ]:
        seg._observe(message)
    assert [(e.type, e.data) for e in d.sink.events] == [
        ("text_delta", {"text": "hel"}),
        ("reasoning_delta", {"text": "hmm"}),
        (
            "tool_call_finished",
            {
                "tool_call_id": "inline",
                "tool_name": "Read",
                "status": "finished",
                "output": "file",
            },
        ),
    ]

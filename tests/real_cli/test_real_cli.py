"""The adapter against the real bundled Claude Code CLI and the scripted Messages API.

Each test drives `ClaudeAgentRunner` as the session engine would (see
`claude_harness`); the `hermetic` fixture fails the test if the CLI asked the
mock for anything it does not serve or tried the refusing proxy.
"""

import base64
import hashlib
import json
from typing import Any

import pytest
from claude_agent_sdk import (
    HookJSONOutput,
    HookMatcher,
    tool,
)
from pydantic import JsonValue

from dex_agents._errors import SessionError
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._runner import APPROVED_CLI_TOOL_OUTPUT
from dex_agents.session import ToolCallsRequested, ToolPolicy
from dex_agents.stores import DirectoryMediaStore
from support.claude_harness import Hermetic, Ledger, Reject, SessionDriver, runner_for

CONTINUE = "Continue from where you left off."


def messages_of(hermetic: Hermetic) -> list[list[JsonValue]]:
    """The `messages` of every model request, in order."""
    bodies = [r.body for r in hermetic.api.requests]
    return [list(b["messages"]) for b in bodies if isinstance(b, dict)]  # type: ignore[arg-type]


def blocks(message: JsonValue) -> list[dict[str, Any]]:
    assert isinstance(message, dict)
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    assert isinstance(content, list)
    return [b for b in content if isinstance(b, dict)]


def tool_results(messages: list[JsonValue]) -> list[dict[str, Any]]:
    return [
        b
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
        for b in blocks(m)
        if b["type"] == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [])


def prompt_count(messages: list[JsonValue], text: str) -> int:
    return sum(
        1
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
        for b in blocks(m)
        if b["type"] == "text" and b.get("text") == text
    )


async def test_read_tool_runs_inline_and_next_turn_resumes(hermetic: Hermetic) -> None:
    ledger = Ledger()
    driver = SessionDriver(runner_for(hermetic, ledger))
    prompt = 'dex-script: call lookup_order {"orderId": "7"}'
    first = await driver.turn(prompt)
    assert first.text == "done: order 7: broken"
    assert len(first.segments) == 1
    assert ledger.lookups == [{"orderId": "7"}]
    assert first.completed.usage.model_calls == 2
    assert first.completed.metadata.response_id is None
    started = driver.sink.of_type("tool_call_started")
    finished = driver.sink.of_type("tool_call_finished")
    assert [e.data["tool_name"] for e in started] == ["lookup_order"]
    assert [(e.data["status"], e.data["output"]) for e in finished] == [
        ("finished", "order 7: broken")
    ]
    assert "".join(str(e.data["text"]) for e in driver.sink.of_type("text_delta")) == (
        "done: order 7: broken"
    )
    roles = [m.role for m in driver.transcript.committed]
    assert roles == ["user", "assistant", "tool", "assistant"]

    second = await driver.turn("dex-script: recall")
    assert second.text == f"recalled:\n{prompt}"
    assert ledger.lookups == [{"orderId": "7"}]
    last = messages_of(hermetic)[-1]
    assert prompt_count(last, prompt) == 1
    assert [result_text(b) for b in tool_results(last)] == ["order 7: broken"]


@pytest.mark.parametrize("permission_mode", [None, "default", "dontAsk"])
async def test_approved_write_resumes_without_prompt_and_runs_once(
    hermetic: Hermetic, permission_mode: str | None
) -> None:
    ledger = Ledger()
    driver = SessionDriver(
        runner_for(hermetic, ledger, permission_mode=permission_mode)
    )
    prompt = 'dex-script: call create_refund {"orderId": "7"}'
    result = await driver.turn(prompt)
    assert result.text == "done: refunded 7"
    [call] = result.calls
    assert call.tool_name == "create_refund"
    assert call.arguments == {"orderId": "7"}
    assert call.policy == ToolPolicy(effect="non_idempotent_write")
    assert call.metadata == {
        "kind": "custom",
        "claude_tool_name": "mcp__tools__create_refund",
    }
    assert ledger.refunds == [{"orderId": "7"}]
    [execution] = ledger.executions
    assert execution is not None
    assert execution.idempotency_key == f"session-1/turn-1/{call.tool_call_id}"
    deferred = result.segments[0]
    assert isinstance(deferred, ToolCallsRequested)
    assert deferred.run_state["deferred"] == {
        "tool_use_id": call.tool_call_id,
        "kind": "custom",
        "tool_name": "mcp__tools__create_refund",
    }
    # The resumed segment sent no prompt: the model saw it once, then the result
    # and the CLI's own continuation.
    requests = messages_of(hermetic)
    assert len(requests) == 2
    assert prompt_count(requests[1], prompt) == 1
    last_user = [m for m in requests[1] if isinstance(m, dict) and m["role"] == "user"][
        -1
    ]
    assert [b["type"] for b in blocks(last_user)] == ["tool_result", "text"]
    assert blocks(last_user)[1]["text"] == CONTINUE
    assert result.completed.usage.model_calls == 1
    assert sum(s.usage.model_calls for s in result.segments) == 2
    # Deferred calls get their events from the session, not the runner.
    assert driver.sink.of_type("tool_call_started") == []


async def test_rejected_write_reaches_the_model_verbatim(hermetic: Hermetic) -> None:
    ledger = Ledger()
    driver = SessionDriver(runner_for(hermetic, ledger))
    result = await driver.turn(
        'dex-script: call create_refund {"orderId": "7"}',
        decide=lambda _call: Reject("not today"),
    )
    assert ledger.refunds == []
    [block] = tool_results(messages_of(hermetic)[-1])
    assert result_text(block) == "The user rejected this call: not today"
    assert block.get("is_error") is True
    assert result.text == "done: The user rejected this call: not today"


async def test_two_writes_in_one_reply_run_one_per_segment(hermetic: Hermetic) -> None:
    ledger = Ledger()
    driver = SessionDriver(runner_for(hermetic, ledger))
    result = await driver.turn(
        'dex-script: call create_refund {"orderId": "1"} '
        '&& call create_refund {"orderId": "2"}'
    )
    assert [c.arguments for c in result.calls] == [{"orderId": "1"}, {"orderId": "2"}]
    assert ledger.refunds == [{"orderId": "1"}, {"orderId": "2"}]
    assert len(result.segments) == 3
    refused = [
        result_text(b)
        for b in tool_results(messages_of(hermetic)[1])
        if "did not run" in result_text(b)
    ]
    assert refused == [
        "PreToolUse:mcp__tools__create_refund hook error: create_refund did not run: "
        "only one call that needs its own step can run per reply. Call again by itself."
    ]
    assert result.text == "done: refunded 1; refunded 2"


async def test_application_hook_rewrites_the_deferred_input(hermetic: Hermetic) -> None:
    """CLI 2.1.327 keeps the original input in the deferral; the adapter must not."""
    seen: list[dict[str, Any]] = []

    async def rewrite(
        hook_input: Any, _tool_use_id: str | None, _context: Any
    ) -> HookJSONOutput:
        seen.append(dict(hook_input["tool_input"]))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {"orderId": "8"},
            }
        }

    ledger = Ledger()
    driver = SessionDriver(
        runner_for(
            hermetic,
            ledger,
            hooks={
                "PreToolUse": [
                    HookMatcher(matcher="mcp__tools__create_refund", hooks=[rewrite])
                ]
            },
        )
    )
    result = await driver.turn('dex-script: call create_refund {"orderId": "7"}')
    [call] = result.calls
    assert call.arguments == {"orderId": "8"}
    assert ledger.refunds == [{"orderId": "8"}]
    # The application's hook ran when the call was deferred, not on resume.
    assert seen == [{"orderId": "7"}]
    assert result.text == "done: refunded 8"


BASH_INPUT = {
    "command": "echo hi-from-bash-$((6*7))",
    "description": "print a greeting",
}


def bash_runner(hermetic: Hermetic, **options: object) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(
        ClaudeAgentDefinition(options=hermetic.options(tools=["Bash"], **options))
    )


async def test_approved_bash_runs_in_the_resumed_segment(hermetic: Hermetic) -> None:
    driver = SessionDriver(bash_runner(hermetic))
    result = await driver.turn(f"dex-script: call Bash {json.dumps(BASH_INPUT)}")
    [call] = result.calls
    assert (call.tool_name, call.arguments) == ("Bash", BASH_INPUT)
    assert call.metadata["kind"] == "cli"
    assert call.policy.needs_approval
    [record] = result.records
    assert record.output == APPROVED_CLI_TOOL_OUTPUT
    assert record.finished_by_resumed_turn
    assert result.text == "done: hi-from-bash-42"
    [finished] = driver.sink.of_type("tool_call_finished")
    assert finished.data["tool_call_id"] == call.tool_call_id
    assert finished.data["status"] == "finished"


async def test_rejected_bash_is_denied_with_the_rejection(hermetic: Hermetic) -> None:
    driver = SessionDriver(bash_runner(hermetic))
    result = await driver.turn(
        f"dex-script: call Bash {json.dumps(BASH_INPUT)}",
        decide=lambda _call: Reject("not today"),
    )
    [block] = tool_results(messages_of(hermetic)[-1])
    assert result_text(block) == "The user rejected this call: not today"
    assert result.text == "done: The user rejected this call: not today"


async def test_bash_runs_the_command_an_application_hook_rewrote(
    hermetic: Hermetic,
) -> None:
    async def rewrite(
        hook_input: Any, _tool_use_id: str | None, _context: Any
    ) -> HookJSONOutput:
        command = str(hook_input["tool_input"]["command"])
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {
                    **hook_input["tool_input"],
                    "command": command.replace("hi-from-bash", "rewritten"),
                },
            }
        }

    driver = SessionDriver(
        bash_runner(
            hermetic,
            hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[rewrite])]},
        )
    )
    result = await driver.turn(f"dex-script: call Bash {json.dumps(BASH_INPUT)}")
    [call] = result.calls
    assert call.arguments["command"] == "echo rewritten-$((6*7))"
    assert result.text == "done: rewritten-42"


# One transparent pixel.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def image_blocks(message: JsonValue) -> list[dict[str, Any]]:
    return [b for b in blocks(message) if b["type"] == "image"]


async def test_user_image_reaches_the_model_and_is_stored_by_reference(
    hermetic: Hermetic,
) -> None:
    media = DirectoryMediaStore(hermetic.base / "media")
    ref = await media.put_image(PNG, "image/png")
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(options=hermetic.options(), media_store=media)
    )
    driver = SessionDriver(runner)
    data = base64.b64encode(PNG).decode()
    prompt = "What does this chart show? dex-script: say a pixel"

    first = await driver.turn(prompt, images=[ref])

    assert first.text == "said: a pixel"
    sent = messages_of(hermetic)[0][0]
    assert isinstance(sent, dict)
    kinds = [b["type"] for b in blocks(sent)]
    assert kinds[:2] == ["text", "image"], kinds
    assert image_blocks(sent)[0]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": data,
    }
    prompt_item = driver.transcript.committed[0].item
    assert prompt_item["images"] == [ref.to_wire()]
    stored = json.dumps([m.item for m in driver.transcript.committed])
    assert data not in stored
    assert json.dumps({"dex_image_reference": ref.to_wire()}) in stored

    second = await driver.turn("dex-script: recall")

    assert second.text.startswith("recalled:")
    resumed = messages_of(hermetic)[-1]
    restored = [b for m in resumed for b in image_blocks(m)]
    assert [b["source"]["data"] for b in restored] == [data]
    assert data not in json.dumps([m.item for m in driver.transcript.committed])


async def test_a_runner_without_a_store_fails_on_stored_image_references(
    hermetic: Hermetic,
) -> None:
    media = DirectoryMediaStore(hermetic.base / "media")
    ref = await media.put_image(PNG, "image/png")
    with_store = ClaudeAgentRunner(
        ClaudeAgentDefinition(options=hermetic.options(), media_store=media)
    )
    driver = SessionDriver(with_store)
    await driver.turn("dex-script: say seen", images=[ref])
    assert not hasattr(runner_for(hermetic), "build_user_message_with_images")

    driver.runner = runner_for(hermetic)
    with pytest.raises(SessionError, match="no media store") as caught:
        await driver.turn("dex-script: recall")
    assert not caught.value.retryable


async def test_deferred_tool_result_images_replay_and_are_stored_by_reference(
    hermetic: Hermetic,
) -> None:
    media = DirectoryMediaStore(hermetic.base / "media")
    data = base64.b64encode(PNG).decode()
    runs: list[dict[str, Any]] = []

    @tool("make_chart", "Draw a chart of an order", {"orderId": str})
    async def make_chart(args: dict[str, Any]) -> dict[str, Any]:
        runs.append(args)
        return {
            "content": [
                {"type": "text", "text": f"chart of {args['orderId']}"},
                {"type": "image", "data": data, "mimeType": "image/png"},
            ]
        }

    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=hermetic.options(),
            custom_tools=[make_chart],
            tool_policies={"make_chart": ToolPolicy(effect="idempotent_write")},
            media_store=media,
        )
    )
    driver = SessionDriver(runner)

    first = await driver.turn('dex-script: call make_chart {"orderId": "7"}')

    # CLI 2.1.327 adds "[Image: source: <path>]" after a result image.
    assert first.text.startswith("done: chart of 7[Image: source: ")
    assert runs == [{"orderId": "7"}]
    (record,) = first.records
    assert record.output == "chart of 7"
    assert [ref.key for ref in record.images] == [
        f"{hashlib.sha256(PNG).hexdigest()}.png"
    ]
    (result,) = tool_results(messages_of(hermetic)[-1])
    assert [b["source"]["data"] for b in image_blocks(result)] == [data]
    stored = json.dumps([m.item for m in driver.transcript.committed])
    assert data not in stored
    assert "dex_image_reference" in stored

    await driver.turn("dex-script: recall")

    (replayed,) = tool_results(messages_of(hermetic)[-1])
    assert [b["source"]["data"] for b in image_blocks(replayed)] == [data]
    assert runs == [{"orderId": "7"}]

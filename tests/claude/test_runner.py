import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, tool

import dex_agents.claude as claude
from dex_agents._errors import ToolExecutionError, UserError
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._definition import DEFAULT_CUSTOM_TOOL_SERVER_NAME
from dex_agents.claude._runner import APPROVED_CLI_TOOL_OUTPUT
from dex_agents.claude._transcript import (
    CLAUDE_TRANSCRIPT_ITEM_KIND,
    USER_PROMPT_ITEM_KIND,
)
from dex_agents.session import ToolCall, ToolPolicy
from dex_agents.session._records import (
    DeferredToolExecution,
    current_deferred_tool_execution,
)
from support.claude_harness import SessionDriver

seen: list[DeferredToolExecution | None] = []


@tool("refund", "Refund", {"id": str})
async def refund(args: dict[str, Any]) -> dict[str, Any]:
    seen.append(current_deferred_tool_execution())
    if args["id"] == "bad":
        return {
            "content": [{"type": "text", "text": "no such order"}],
            "is_error": True,
        }
    if args["id"] == "crash":
        raise RuntimeError("provider down")
    return {"content": [{"type": "text", "text": f"refunded {args['id']}"}]}


RUNNER = ClaudeAgentRunner(
    ClaudeAgentDefinition(options=ClaudeAgentOptions(), custom_tools=[refund])
)
EXECUTION = DeferredToolExecution(
    flow_id="s",
    turn_id="t",
    tool_call_id="c",
    step_execution_id="x",
    attempt=2,
    idempotency_key="s/t/c",
)


def call(name: str, arguments: dict[str, Any], kind: str = "custom") -> ToolCall:
    return ToolCall(
        tool_call_id="c",
        tool_name=name,
        arguments=arguments,
        policy=ToolPolicy(effect="non_idempotent_write"),
        metadata={"kind": kind},
    )


def test_public_names_are_pinned() -> None:
    public = sorted(
        n
        for n, v in vars(claude).items()
        if not n.startswith("_") and not isinstance(v, ModuleType)
    )
    assert claude.__all__ == sorted(claude.__all__)
    assert claude.__all__ == public
    assert DEFAULT_CUSTOM_TOOL_SERVER_NAME == "tools"
    assert USER_PROMPT_ITEM_KIND == "user_prompt"
    assert CLAUDE_TRANSCRIPT_ITEM_KIND == "claude_transcript"


def test_imports_without_temporalio() -> None:
    code = "import sys, dex_agents.claude; assert 'temporalio' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_user_message_item_and_compaction() -> None:
    assert RUNNER.build_user_message("hi") == {"kind": "user_prompt", "text": "hi"}
    RUNNER.validate_session_options(compaction=None)
    with pytest.raises(UserError, match="compaction"):
        RUNNER.validate_session_options(compaction=object())


async def test_deferred_custom_tool_runs_with_its_execution() -> None:
    seen.clear()
    outcome = await RUNNER.execute_deferred_tool(call("refund", {"id": "7"}), EXECUTION)
    assert outcome.output == "refunded 7" and not outcome.finished_by_resumed_turn
    assert seen == [EXECUTION]
    assert current_deferred_tool_execution() is None


async def test_error_results_and_bad_input_are_failed_records() -> None:
    seen.clear()
    with pytest.raises(ToolExecutionError, match="no such order"):
        await RUNNER.execute_deferred_tool(call("refund", {"id": "bad"}), EXECUTION)
    with pytest.raises(ToolExecutionError, match="Input validation error"):
        await RUNNER.execute_deferred_tool(call("refund", {"id": 7}), EXECUTION)
    with pytest.raises(ToolExecutionError, match="no longer has"):
        await RUNNER.execute_deferred_tool(call("gone", {}), EXECUTION)
    with pytest.raises(RuntimeError, match="provider down"):
        await RUNNER.execute_deferred_tool(call("refund", {"id": "crash"}), EXECUTION)
    assert len(seen) == 2
    assert current_deferred_tool_execution() is None


async def test_approved_cli_tools_finish_in_the_resumed_turn() -> None:
    outcome = await RUNNER.execute_deferred_tool(
        call("Bash", {"command": "ls"}, "cli"), EXECUTION
    )
    assert outcome.output == APPROVED_CLI_TOOL_OUTPUT
    assert outcome.finished_by_resumed_turn


async def test_allowed_tools_check_uses_session_policies() -> None:
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(
                allowed_tools=["mcp__tools__refund"], cli_path="/nonexistent"
            ),
            custom_tools=[refund],
        )
    )
    with pytest.raises(TypeError, match="mcp__tools__refund"):
        await SessionDriver(runner).turn("hi")
    for entry in ["mcp__tools", "mcp__tools__*", "Bash(ls:*)"]:
        runner = ClaudeAgentRunner(
            ClaudeAgentDefinition(
                options=ClaudeAgentOptions(
                    allowed_tools=[entry], cli_path="/nonexistent"
                ),
                custom_tools=[refund],
            )
        )
        with pytest.raises(TypeError, match="allowed_tools"):
            await SessionDriver(runner).turn("hi")

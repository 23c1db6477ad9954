"""An in-process SDK server in `options.mcp_servers` is refused; its tools go in `custom_tools`.

Its tools used to be served by the CLI itself: their annotations were ignored
(a `readOnlyHint` tool waited for approval as unclassified, while the same tool
in `custom_tools` ran inline), and an approved write ran inside the resumed
segment, at least once, with no Step and no idempotency key. Classifying them
would mean reading the tools back out of the server's closures, which the SDK
does not expose, so the options are refused (when the agent is defined, for
options given as they are; in each attempt, for a factory's) with the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    McpSdkServerConfig,
    SdkMcpTool,
    ToolAnnotations,
    create_sdk_mcp_server,
    tool,
)
from mcp.server import Server

from dex_agents import InvalidOptionError
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    ClaudeAgentRunner,
)
from support.claude_harness import SessionDriver, fake_options

FIX = "pass its tools as `custom_tools=[...]` instead"


def notes_tool(calls: list[dict[str, Any]]) -> SdkMcpTool[Any]:
    @tool(
        "read_note",
        "Read a note",
        {"noteId": str},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def read_note(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"content": [{"type": "text", "text": f"note {args['noteId']}"}]}

    return read_note


def test_an_sdk_server_in_options_is_refused_when_defined() -> None:
    notes = create_sdk_mcp_server("notes", tools=[notes_tool([])])
    with pytest.raises(InvalidOptionError) as caught:
        ClaudeAgentDefinition(options=ClaudeAgentOptions(mcp_servers={"notes": notes}))
    message = str(caught.value)
    assert "`mcp_servers['notes']` is an in-process SDK server" in message, message
    assert FIX in message, message
    assert "custom_tool_server_name='notes'" in message, message


def test_a_hand_built_sdk_server_is_refused_as_well() -> None:
    """`McpSdkServerConfig` around any `mcp.server.Server` is served the same way."""
    config = McpSdkServerConfig(type="sdk", name="mine", instance=Server("mine"))
    with pytest.raises(InvalidOptionError, match=r"`mcp_servers\['mine'\]`"):
        ClaudeAgentDefinition(options=ClaudeAgentOptions(mcp_servers={"mine": config}))


async def test_a_factory_that_adds_one_fails_the_turn_before_its_tool_runs(
    tmp_path: Path,
) -> None:
    calls: list[dict[str, Any]] = []
    notes = create_sdk_mcp_server("notes", tools=[notes_tool(calls)])

    def factory(_context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        return fake_options(tmp_path, tools=[], mcp_servers={"notes": notes})

    driver = SessionDriver(ClaudeAgentRunner(ClaudeAgentDefinition(options=factory)))
    with pytest.raises(InvalidOptionError, match=FIX.replace("[", r"\[")):
        await driver.turn('dex-script: call mcp__notes__read_note {"noteId": "1"}')
    assert calls == []


async def test_the_same_tool_in_custom_tools_runs_inline_by_its_annotations(
    tmp_path: Path,
) -> None:
    """The fix the refusal names works: named as before, read inline, no approval."""
    calls: list[dict[str, Any]] = []
    with pytest.raises(InvalidOptionError, match="in-process SDK server"):
        ClaudeAgentDefinition(
            options=fake_options(
                tmp_path,
                tools=[],
                mcp_servers={
                    "notes": create_sdk_mcp_server("notes", tools=[notes_tool(calls)])
                },
            )
        )
    agent = ClaudeAgentDefinition(
        options=fake_options(tmp_path, tools=[]),
        custom_tools=[notes_tool(calls)],
        custom_tool_server_name="notes",
    )
    result = await SessionDriver(ClaudeAgentRunner(agent)).turn(
        'dex-script: call mcp__notes__read_note {"noteId": "1"}'
    )
    assert result.text == "done: note 1"
    assert result.calls == [] and len(result.segments) == 1
    assert calls == [{"noteId": "1"}]

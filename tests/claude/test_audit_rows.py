"""Adapter rows of docs/spec-coverage.md that an audit found without a proving test.

Row ids are in each docstring. Most tests drive `ClaudeAgentRunner` through
`claude_harness.SessionDriver` with the fake CLI (no network, no model); the
listing test plays the CLI's side with `gate_rig.ScriptedCli`, and the usage
test feeds `SegmentObserver` directly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookMatcher,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolAnnotations,
    tool,
)
from support.claude_harness import Ledger, SessionDriver
from support.gate_rig import CliSide, ScriptedCli, completed

from support.cli_argv_recorder import recording_cli
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._usage import SegmentObserver
from dex_agents.session import (
    RunModelContext,
    ToolCallsRequested,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.session._tool_sources import SourceTool, ToolSourceContext
from dex_agents.session._usage import ModelCallMetadata
from support.fake_cli import fake_claude_cli_path

# --- shared pieces ------------------------------------------------------------


def audit_options(base: Path, **overrides: object) -> ClaudeAgentOptions:
    """Options for the fake CLI in `base/cwd`, Bash its only Claude Code tool."""
    cwd = base / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    values: dict[str, object] = {
        "cli_path": str(fake_claude_cli_path()),
        "cwd": str(cwd.resolve()),
        "tools": ["Bash"],
        "setting_sources": [],
        "env": {},
    }
    values.update(overrides)
    # Overrides are ClaudeAgentOptions fields; the kwargs are not typed per field.
    return ClaudeAgentOptions(**values)  # pyright: ignore[reportArgumentType]


def bash(command: str) -> str:
    return f"dex-script: call Bash {json.dumps({'command': command})}"


class AskedPermission:
    """A `claude_code_tool_permission` that records every question it gets."""

    def __init__(self, answer: ToolPolicy | None) -> None:
        self.answer = answer
        self.asked: list[tuple[RunModelContext, str, dict[str, Any]]] = []

    async def __call__(
        self, context: RunModelContext, name: str, tool_input: dict[str, Any]
    ) -> ToolPolicy | None:
        self.asked.append((context, name, dict(tool_input)))
        return self.answer

    @property
    def questions(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, tool_input) for _, name, tool_input in self.asked]


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


# --- row 78 -------------------------------------------------------------------


async def test_row78_the_permission_callback_gets_the_hook_rewritten_input_and_the_run_model_context(
    tmp_path: Path,
) -> None:
    """Row 78: the callback sees the input after the application's PreToolUse hooks
    (what runs), and the context is the very RunModelContext of the attempt."""
    hook_saw: list[dict[str, Any]] = []

    async def rewrite_bash(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        hook_saw.append(dict(hook_input["tool_input"]))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {
                    "command": "echo rewritten >> audit.log; echo rewritten-ran"
                },
            }
        }

    permission = AskedPermission(ToolPolicy(effect="read"))
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=audit_options(
                tmp_path,
                hooks={
                    "PreToolUse": [HookMatcher(matcher="Bash", hooks=[rewrite_bash])]
                },
            ),
            claude_code_tool_permission=permission,
        )
    )
    driver = SessionDriver(runner, session_id="audit-row78")
    original = "echo original >> audit.log; echo original-ran"
    item = runner.build_user_message(bash(original))
    context = driver.context(turn_id="turn-1", step=1, pending=(item,), resume=None)
    result = await runner.run_model(context)

    assert hook_saw == [{"command": original}]
    assert permission.questions == [
        ("Bash", {"command": "echo rewritten >> audit.log; echo rewritten-ran"})
    ]
    ((asked_context, _, _),) = permission.asked
    assert asked_context is context
    assert (
        asked_context.session_id,
        asked_context.turn_id,
        asked_context.step_execution_id,
        asked_context.attempt,
    ) == ("audit-row78", "turn-1", "turn-1/run_model-1", 1)
    # The callback's read ran the call inline, with the input it was asked about.
    assert isinstance(result, TurnCompleted)
    assert result.final_text == "done: rewritten-ran"
    assert (tmp_path / "cwd" / "audit.log").read_text().splitlines() == ["rewritten"]


# --- row 85 -------------------------------------------------------------------


async def test_row85_a_callback_read_does_not_let_allowed_tools_list_a_deferring_tool(
    tmp_path: Path,
) -> None:
    """Row 85 (a): no session policy for Bash, so `allowed_tools=["Bash"]` is refused,
    though the callback would answer read; the check never asks the callback."""
    permission = AskedPermission(ToolPolicy(effect="read"))
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=audit_options(tmp_path, allowed_tools=["Bash"]),
            claude_code_tool_permission=permission,
        )
    )
    with pytest.raises(TypeError, match=r"`allowed_tools` lists 'Bash'"):
        await SessionDriver(runner, session_id="audit-row85-a").turn(bash("echo x"))
    assert permission.asked == []
    assert not (tmp_path / "cwd" / "x").exists()


# The SDK warns that `allowed_tools=["Bash"]` shadows can_use_tool; the
# adapter's PreToolUse hook still decides every call, as the test shows.
@pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")
async def test_row85_a_session_read_policy_admits_allowed_tools_whatever_the_callback_says(
    tmp_path: Path,
) -> None:
    """Row 85 (b): a session read policy for Bash admits `allowed_tools=["Bash"]`
    though the callback answers a write; the check does not call the callback,
    and the callback still decides each call (it defers for approval)."""
    permission = AskedPermission(ToolPolicy(effect="non_idempotent_write"))
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=audit_options(tmp_path, allowed_tools=["Bash"]),
            tool_policies={"Bash": ToolPolicy(effect="read")},
            claude_code_tool_permission=permission,
        )
    )
    driver = SessionDriver(runner, session_id="audit-row85-b")
    said = await driver.turn("dex-script: say accepted")
    assert said.text == "said: accepted"
    assert permission.asked == []

    result = await driver.turn(bash("echo ran"))
    assert permission.questions == [("Bash", {"command": "echo ran"})]
    [call] = result.calls
    assert call.policy == ToolPolicy(effect="non_idempotent_write")
    assert call.policy.needs_approval
    assert len(result.segments) == 2
    assert result.text == "done: ran"


# --- row 98 -------------------------------------------------------------------


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
            options=audit_options(tmp_path),
            custom_tools=[audit_lookup],
            tool_sources=[AuditSource("audit-src", listed)],
        )
    )
    driver = SessionDriver(runner, session_id="audit-row98")
    with pytest.raises(TypeError, match="'audit_lookup', which is a custom"):
        await driver.turn('dex-script: call audit_lookup {"orderId": "1"}')
    # The attempt failed before any CLI ran: nothing reached the model.
    assert driver.sink.events == []


# --- row 101 ------------------------------------------------------------------


def test_row101_the_default_listing_timeout_is_ten_seconds() -> None:
    """Row 101: `tool_source_listing_timeout` is 10 s unless the definition says."""
    definition = ClaudeAgentDefinition(options=ClaudeAgentOptions())
    assert definition.tool_source_listing_timeout == timedelta(seconds=10)


# --- rows 41, 88, 96 ----------------------------------------------------------


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
            options=audit_options(tmp_path),
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


# --- row 156 ------------------------------------------------------------------


def test_row156_after_a_fallback_one_answering_model_is_the_response_model() -> None:
    """Row 156: the init model is requested; every answer came from the fallback
    model, so the response model names it."""
    observer = SegmentObserver()
    for message in (
        SystemMessage(subtype="init", data={"model": "claude-opus"}),
        AssistantMessage(
            content=[TextBlock(text="a")],
            model="claude-sonnet-fallback",
            message_id="m1",
        ),
        AssistantMessage(
            content=[TextBlock(text="b")],
            model="claude-sonnet-fallback",
            message_id="m2",
        ),
    ):
        observer.observe(message)
    result = ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=1,
        session_id="s",
        model_usage={
            "claude-opus": {"provider": "firstParty"},  # pyright: ignore[reportArgumentType]
            "claude-sonnet-fallback": {"provider": "firstParty"},  # pyright: ignore[reportArgumentType]
        },
    )
    assert observer.metadata(result, "opus") == ModelCallMetadata(
        request_model="claude-opus",
        response_model="claude-sonnet-fallback",
        provider_name="anthropic",
    )


# --- row 160 ------------------------------------------------------------------


def flag_values(argv: list[str], flag: str) -> list[str]:
    """Every value of `--flag value` or `--flag=value` on `argv`."""
    values: list[str] = []
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            values.append(argv[index + 1])
        elif token.startswith(f"{flag}="):
            values.append(token.removeprefix(f"{flag}="))
    return values


async def test_row160_permission_mode_dont_ask_reaches_every_segments_cli(
    tmp_path: Path,
) -> None:
    """Row 160: `permission_mode="dontAsk"` is passed through to the CLI's argv on the
    deferring and the resumed segment, and the write still defers and resumes."""
    script, log = recording_cli(tmp_path)
    ledger = Ledger()
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=audit_options(
                tmp_path, cli_path=str(script), permission_mode="dontAsk"
            ),
            custom_tools=ledger.tools(),
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        )
    )
    driver = SessionDriver(runner, session_id="audit-row160")
    result = await driver.turn('dex-script: call create_refund {"orderId": "7"}')
    assert result.text == "done: refunded 7"
    assert ledger.refunds == [{"orderId": "7"}]
    assert isinstance(result.segments[0], ToolCallsRequested)
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(runs) == 2, runs
    assert [flag_values(argv, "--permission-mode") for argv in runs] == [
        ["dontAsk"],
        ["dontAsk"],
    ]

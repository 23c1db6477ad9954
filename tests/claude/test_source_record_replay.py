"""A tool source call's record replays only as its own tool (docs/spec-coverage.md row 194).

A source call defers like a served custom tool: its run state names the custom
tool server's tool (`mcp__tools__transfer`) and its record the bare source tool
(`transfer`). These tests play a misbehaving CLI (`gate_rig.CliSide`) that
presents the resumed call's tool use ID under another tool, a Claude Code tool
above all, and check that the record never replays there, nor as another source
or custom tool, and that it replays, once, as its own tool. The source is a
`ConnectorToolSource` over the fake ledger, whose rows count every operation
run, and the custom tools count their runs in a `claude_harness.Ledger`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage

from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._gate import ToolCallGate
from dex_agents.claude._hooks import ToolPermissions
from dex_agents.claude._pending_call import CallKind, PendingCall
from dex_agents.claude._sources import segment_tools
from dex_agents.claude._tools import CustomTool
from dex_agents.connectors import ConnectorToolSource
from dex_agents.session import ToolCallsRequested
from dex_agents.session._records import ToolRecord
from dex_agents.session._runner import ResumeState
from dex_agents.session._tool_sources import ToolSource
from dex_agents.testing import Ledger as JsonLedger
from dex_agents.testing._fake_ledger_connector import fake_ledger_connector_tools
from support.claude_harness import Ledger, SessionDriver
from support.claude_steps import PermissionsRig, tool_permissions
from support.gate_rig import (
    CliSide,
    ScriptedCli,
    completed,
    deferred,
    tool_use_entry,
)

TRANSFER = "mcp__tools__transfer"
"""The source tool whose call is pending, as the CLI names it."""
READ_BALANCE = "mcp__tools__read_balance"
"""Another tool of the same source."""
LOOKUP = "mcp__tools__lookup_order"
"""A custom tool (an approval-free read) served beside the source's tools."""
REFUND = "mcp__tools__create_refund"
"""A custom tool that defers."""
RECORDED = {"account": "a", "amount": 5}
"""The recorded (approved) arguments of the pending transfer."""
MODELS = {"account": "mallory", "amount": 500, "command": "rm -rf /"}
"""What the CLI sends instead; it must never reach a tool."""
OUTPUT = "transferred 5 to a"

OTHER_TOOLS = [
    # Tools inside the CLI, the pending call's tool use ID reused.
    "Bash",
    "Write",
    "Read",
    # The bare source tool name, as if the CLI had a tool of that name.
    "transfer",
    # Another tool of the same source, and the custom tools beside it.
    READ_BALANCE,
    LOOKUP,
    REFUND,
    # The same tool under another MCP server of the CLI.
    "mcp__other__transfer",
]


def transfer_record(**changes: Any) -> ToolRecord:
    values: dict[str, Any] = {
        "tool_call_id": "s",
        "tool_name": "transfer",
        "arguments": RECORDED,
        "status": "finished",
        "output": OUTPUT,
        "attempts": 1,
    }
    values.update(changes)
    return ToolRecord(**values)


def source_pending(**changes: Any) -> PendingCall:
    """The pending call as the adapter's run state of a source deferral makes it."""
    return PendingCall(
        tool_use_id="s",
        kind="custom",
        tool_name=TRANSFER,
        record=transfer_record(**changes),
    )


class SourceRig(PermissionsRig):
    """One resumed segment's ToolPermissions and gate, with a source and custom tools."""

    def __init__(self, ledger_path: Path, pending: PendingCall) -> None:
        self.ledger_path = ledger_path
        self.pending = pending
        self.custom = Ledger()
        self.source = ConnectorToolSource(fake_ledger_connector_tools(str(ledger_path)))
        self.gate = ToolCallGate()
        self.tools: dict[str, CustomTool] = {}
        self.permissions: ToolPermissions | None = None

    async def serve(self, *, listed: bool) -> None:
        """The segment's tools, as `segment_tools` builds them for the resume.

        `listed=False`: the source lists nothing now, so the pending call's tool
        is served replay-only (a vanished tool).
        """
        sources: list[ToolSource] = [self.source] if listed else [_Silent()]
        runner = ClaudeAgentRunner(ClaudeAgentDefinition(options=ClaudeAgentOptions()))
        driver = SessionDriver(runner, session_id="source-record-replay-rig")
        resume = ResumeState(run_state={}, messages=(), records=(self.pending.record,))
        context = driver.context(turn_id="turn-1", step=2, pending=(), resume=resume)
        custom = {t.name: CustomTool.from_sdk(t) for t in self.custom.tools()}
        self.tools = await segment_tools(
            context=context,
            custom=custom,
            sources=sources,
            timeout=timedelta(seconds=5),
        )
        served = self.tools["transfer"]
        assert served.source is not None and served.replay_only is not listed
        self.permissions = tool_permissions(
            context, self.gate, self.tools, pending=self.pending
        )

    def nothing_ran(self) -> bool:
        """No source operation and no custom tool ran in the segment."""
        rows = JsonLedger(self.ledger_path).entries()
        return rows == [] and self.custom.lookups == [] and self.custom.refunds == []


class _Silent:
    """A source that lists nothing, so the pending call's tool has vanished."""

    source_name = "silent"
    declared_tool_names: list[str] = []

    async def list_tools(self, context: Any) -> list[Any]:
        del context
        return []

    async def build_call(self, tool_name: str, arguments: Any) -> Any:
        raise AssertionError(f"{tool_name} must not be built in a resumed segment")

    async def execute_deferred_tool_call(self, call: Any, execution: Any) -> Any:
        raise AssertionError(f"{call.tool_name} must not run in a segment")

    def tool_call_step_options(self, tool_name: str) -> Any:
        raise AssertionError(f"{tool_name} has no step in a segment")


async def source_rig(
    tmp_path: Path, pending: PendingCall, *, listed: bool
) -> SourceRig:
    rig = SourceRig(tmp_path / "ledger.jsonl", pending)
    await rig.serve(listed=listed)
    return rig


LISTINGS = pytest.mark.parametrize("listed", [True, False], ids=["listed", "vanished"])


# A source record replays as its own tool, once, with its recorded arguments.


@LISTINGS
async def test_a_source_record_replays_once_as_its_own_tool(
    tmp_path: Path, listed: bool
) -> None:
    rig = await source_rig(tmp_path, source_pending(), listed=listed)
    async with rig.cli() as cli:
        out = await cli.pre_tool_use(TRANSFER, MODELS, "s")
        assert (out["permissionDecision"], out["updatedInput"]) == ("allow", RECORDED)
        assert rig.kind("s") == "replay"
        served = await cli.call("transfer", MODELS, "s")
        assert (served.text, served.is_error) == (OUTPUT, False)
        # Once: neither the server nor the hook nor can_use_tool answers it again.
        assert (await cli.call("transfer", RECORDED, "s")).refused
        assert await cli.decision(TRANSFER, RECORDED, "s") == "deny"
        assert (await cli.can_use_tool(TRANSFER, RECORDED, "s")).behavior == "deny"
    # The record answered the call: the source's operation did not run again.
    assert rig.nothing_ran()


@LISTINGS
async def test_can_use_tool_replays_a_source_record_as_its_own_tool(
    tmp_path: Path, listed: bool
) -> None:
    rig = await source_rig(tmp_path, source_pending(), listed=listed)
    async with rig.cli() as cli:
        answer = await cli.can_use_tool(TRANSFER, MODELS, "s")
        assert answer.behavior == "allow"
        assert answer.updated_input == RECORDED
        served = await cli.call("transfer", MODELS, "s")
        assert (served.text, served.is_error) == (OUTPUT, False)
    assert rig.nothing_ran()


# A source record never replays as another tool: not inside the CLI, not as
# another source or custom tool, not under another server.


@LISTINGS
@pytest.mark.parametrize("other", OTHER_TOOLS)
async def test_a_source_record_never_replays_as_another_tool(
    tmp_path: Path, listed: bool, other: str
) -> None:
    rig = await source_rig(tmp_path, source_pending(), listed=listed)
    async with rig.cli() as cli:
        out = await cli.pre_tool_use(other, MODELS, "s")
        assert out["permissionDecision"] == "deny"
        assert "updatedInput" not in out
        assert "recorded as mcp__tools__transfer" in out["permissionDecisionReason"]
        assert rig.kind("s") == "deny"
        # The ID is decided now; its own tool cannot take it back.
        assert await cli.decision(TRANSFER, RECORDED, "s") == "deny"
        assert (await cli.can_use_tool(TRANSFER, RECORDED, "s")).behavior == "deny"
        for name in ("transfer", "read_balance", "lookup_order", "create_refund"):
            assert (await cli.call(name, RECORDED, "s")).refused, name
    assert rig.nothing_ran()


@LISTINGS
@pytest.mark.parametrize("other", OTHER_TOOLS)
async def test_can_use_tool_never_replays_a_source_record_as_another_tool(
    tmp_path: Path, listed: bool, other: str
) -> None:
    # The CLI skipped PreToolUse for the resumed call and asks can_use_tool.
    rig = await source_rig(tmp_path, source_pending(), listed=listed)
    async with rig.cli() as cli:
        answer = await cli.can_use_tool(other, MODELS, "s")
        assert answer.behavior == "deny"
        assert rig.kind("s") == "deny"
        # The one answer is spent: the right tool does not get a second one.
        own = await cli.can_use_tool(TRANSFER, RECORDED, "s")
        assert own.behavior == "deny"
        assert await cli.decision(TRANSFER, RECORDED, "s") == "deny"
        for name in ("transfer", "read_balance", "lookup_order", "create_refund"):
            assert (await cli.call(name, RECORDED, "s")).refused, name
    assert rig.nothing_ran()


@pytest.mark.parametrize("status", ["rejected", "failed", "outcome_unknown"])
async def test_a_source_record_that_did_not_finish_never_reaches_bash(
    tmp_path: Path, status: str
) -> None:
    # A CLI record that must not run is answered `ask`; a source record never is.
    pending = source_pending(status=status, output="it broke", rejection_message="no")
    rig = await source_rig(tmp_path, pending, listed=True)
    async with rig.cli() as cli:
        out = await cli.pre_tool_use("Bash", {"command": "echo hi"}, "s")
        assert out["permissionDecision"] == "deny"
        assert (
            await cli.can_use_tool("Bash", {"command": "echo hi"}, "s")
        ).behavior == ("deny")
        assert (await cli.call("transfer", RECORDED, "s")).refused
    assert rig.nothing_ran()


@pytest.mark.parametrize(
    ("kind", "tool_name"),
    [
        # Run states that disagree with the source record they resume.
        ("cli", "Bash"),
        ("cli", TRANSFER),
        ("custom", "Bash"),
        ("custom", READ_BALANCE),
        ("custom", LOOKUP),
        ("custom", "mcp__other__transfer"),
    ],
)
@pytest.mark.parametrize("asked", [False, True], ids=["hook", "can_use_tool"])
async def test_a_source_record_replays_only_as_the_tool_and_kind_it_records(
    tmp_path: Path, kind: CallKind, tool_name: str, asked: bool
) -> None:
    pending = PendingCall(
        tool_use_id="s", kind=kind, tool_name=tool_name, record=transfer_record()
    )
    rig = await source_rig(tmp_path, pending, listed=True)
    async with rig.cli() as cli:
        if asked:
            answer = await cli.can_use_tool(tool_name, MODELS, "s")
            assert answer.behavior == "deny"
        else:
            out = await cli.pre_tool_use(tool_name, MODELS, "s")
            assert out["permissionDecision"] == "deny"
            assert "updatedInput" not in out
        assert rig.kind("s") == "deny"
        for name in ("transfer", "read_balance", "lookup_order"):
            assert (await cli.call(name, RECORDED, "s")).refused, name
    assert rig.nothing_ran()


@pytest.mark.parametrize("asked", [False, True], ids=["hook", "can_use_tool"])
async def test_a_source_record_never_replays_as_a_cli_tool_of_its_own_name(
    tmp_path: Path, asked: bool
) -> None:
    # A run state that says the call was deferred inside the CLI, under the bare
    # name its record holds: the record is of a tool this segment serves (a
    # source's), so it must not be answered as a tool inside the CLI.
    pending = PendingCall(
        tool_use_id="s", kind="cli", tool_name="transfer", record=transfer_record()
    )
    rig = await source_rig(tmp_path, pending, listed=True)
    async with rig.cli() as cli:
        if asked:
            answer = await cli.can_use_tool("transfer", MODELS, "s")
            assert answer.behavior == "deny"
        else:
            out = await cli.pre_tool_use("transfer", MODELS, "s")
            assert out["permissionDecision"] == "deny"
            assert "updatedInput" not in out
        assert rig.kind("s") == "deny"
        assert (await cli.call("transfer", RECORDED, "s")).refused
    assert rig.nothing_ran()


# Whole segments: the adapter's own deferral of a source call, its tool Step
# through the source, and the resumed segment whose CLI reuses the ID.


def source_driver(tmp_path: Path, session_id: str) -> tuple[SessionDriver, JsonLedger]:
    ledger = JsonLedger(str(tmp_path / "ledger.jsonl"))
    options = ClaudeAgentOptions(
        cli_path=str(tmp_path / "never-started"), cwd=str(tmp_path)
    )
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=options,
            tool_sources=[
                ConnectorToolSource(fake_ledger_connector_tools(str(ledger.path)))
            ],
        )
    )
    return SessionDriver(runner, session_id=session_id), ledger


async def defer_transfer(cli: CliSide) -> ResultMessage:
    assert await cli.decision(TRANSFER, RECORDED, "s") == "defer"
    await cli.mirror(tool_use_entry("u1", "s", TRANSFER))
    return deferred("s", TRANSFER, RECORDED)


async def test_a_resumed_source_call_is_not_replayed_as_bash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def bash_under_the_source_calls_id(cli: CliSide) -> ResultMessage:
        out = await cli.pre_tool_use("Bash", {"command": "echo pwned"}, "s")
        assert out["permissionDecision"] == "deny"
        assert "updatedInput" not in out
        answer = await cli.can_use_tool("Bash", {"command": "echo pwned"}, "s")
        assert answer.behavior == "deny"
        assert await cli.decision(TRANSFER, RECORDED, "s") == "deny"
        assert await cli.decision(READ_BALANCE, {"account": "a"}, "s") == "deny"
        assert (await cli.call("transfer", RECORDED, "s")).refused
        assert (await cli.call("read_balance", {"account": "a"}, "s")).refused
        return completed()

    scripts = ScriptedCli(monkeypatch, defer_transfer, bash_under_the_source_calls_id)
    driver, ledger = source_driver(tmp_path, "source-record-replay-bash")
    result = await driver.turn("move 5 to a")
    assert scripts.remaining == 0
    [first, _] = result.segments
    # The adapter's run state of a source deferral: a served tool's, as rigged above.
    assert isinstance(first, ToolCallsRequested)
    run_state: Any = first.run_state
    assert run_state["deferred"] == {
        "tool_use_id": "s",
        "kind": "custom",
        "tool_name": TRANSFER,
    }
    [call] = result.calls
    assert (call.tool_name, call.metadata["kind"]) == ("transfer", "source")
    [record] = result.records
    assert (record.tool_name, record.status, record.output) == (
        "transfer",
        "finished",
        OUTPUT,
    )
    # The transfer ran once, in its tool Step; nothing ran for the Bash call.
    assert ledger.count("ledger_entry") == 1


async def test_a_resumed_source_call_replays_as_its_own_tool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def resume_transfer(cli: CliSide) -> ResultMessage:
        out = await cli.pre_tool_use(TRANSFER, MODELS, "s")
        assert (out["permissionDecision"], out["updatedInput"]) == ("allow", RECORDED)
        served = await cli.call("transfer", MODELS, "s")
        assert (served.text, served.is_error) == (OUTPUT, False)
        assert (await cli.call("transfer", RECORDED, "s")).refused
        return completed()

    scripts = ScriptedCli(monkeypatch, defer_transfer, resume_transfer)
    driver, ledger = source_driver(tmp_path, "source-record-replay-own")
    result = await driver.turn("move 5 to a")
    assert scripts.remaining == 0
    assert [r.status for r in result.records] == ["finished"]
    assert ledger.count("ledger_entry") == 1

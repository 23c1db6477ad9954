"""Adapter behaviors of docs/spec-coverage.md that needed a test (rows by id in each docstring).

Most drive `ClaudeAgentRunner` through `claude_harness.SessionDriver` with the
fake CLI (no network, no model); a few feed the segment's own logic directly.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    DeferredToolUse,
    ResultMessage,
    ToolResultBlock,
    UserMessage,
)

from dex_agents._errors import UserError
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    ClaudeAgentRunner,
    create_claude_agent_session_flow,
)
from dex_agents.claude._gate import Decision
from dex_agents.claude._pending_call import PendingCall
from dex_agents.claude._runner import APPROVED_CLI_TOOL_OUTPUT
from dex_agents.claude._segment import Segment, SegmentSetup
from dex_agents.claude._transcript import ClaudeTranscriptStore
from dex_agents.connectors import ConnectorToolSource
from dex_agents.session import (
    AgentSessionOptions,
    ToolCall,
    ToolCallsRequested,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.session._records import ToolRecord
from dex_agents.session._runner import ResumeState
from dex_agents.session._usage import ModelCallMetadata
from dex_agents.testing import (
    Ledger as JsonLedger,
)
from dex_agents.testing._fake_ledger_connector import fake_ledger_connector_tools
from support.claude_harness import (
    Hermetic,
    Ledger,
    PermissionRecorder,
    SessionDriver,
    bash,
    fake_options,
)
from support.claude_steps import fallback_segment
from support.cli_argv_recorder import flag_value, recorded_runs, recording_cli
from support.fake_cli import FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV
from support.mcp_source_rig import AUTH, http_server

# --- shared pieces ------------------------------------------------------------


REFUND = 'dex-script: call create_refund {"orderId": "7"}'


def refund_runner(base: Path, ledger: Ledger, **options: object) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(base, **options),
            custom_tools=ledger.tools(),
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        )
    )


# --- row 28 -------------------------------------------------------------------


def test_row28_session_options_with_tool_policies_are_refused() -> None:
    """Row 28: policies belong to the definition; the session options carry none."""
    agent = ClaudeAgentDefinition(
        options=ClaudeAgentOptions(),
        tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
    )
    with pytest.raises(UserError, match="tool_policies") as raised:
        create_claude_agent_session_flow(
            agent,
            "Row28Flow",
            AgentSessionOptions(tool_policies={"Bash": ToolPolicy(effect="read")}),
        )
    assert "['Bash']" in str(raised.value)
    # Without policies in the session options the definition's become the session's.
    flow = create_claude_agent_session_flow(agent, "Row28Flow", AgentSessionOptions())
    assert flow.options.tool_policies == {
        "create_refund": ToolPolicy(effect="non_idempotent_write")
    }


# --- rows 43 and 147 ----------------------------------------------------------


async def test_row43_await_initialize_reaches_the_cli_on_every_segment(
    tmp_path: Path,
) -> None:
    """Row 43: `--await-initialize` is on the argv of a first and a resumed segment."""
    script, log = recording_cli(tmp_path)
    ledger = Ledger()
    driver = SessionDriver(refund_runner(tmp_path, ledger, cli_path=str(script)))
    result = await driver.turn(REFUND)
    assert result.text == "done: refunded 7"
    assert ledger.refunds == [{"orderId": "7"}]
    runs = recorded_runs(log)
    assert len(runs) == 2, runs
    first, resumed = runs
    deferred = result.segments[0]
    assert isinstance(deferred, ToolCallsRequested)
    assert flag_value(first, "--resume") is None
    assert flag_value(resumed, "--resume") == deferred.run_state["session_id"]
    for argv in runs:
        assert argv.count("--await-initialize") == 1, argv


async def test_row147_max_budget_usd_passes_to_the_cli_unchanged(
    tmp_path: Path,
) -> None:
    """Row 147: `max_budget_usd` is not refused and reaches every segment's argv."""
    script, log = recording_cli(tmp_path)
    ledger = Ledger()
    driver = SessionDriver(
        refund_runner(tmp_path, ledger, cli_path=str(script), max_budget_usd=0.25)
    )
    result = await driver.turn(REFUND)
    assert result.text == "done: refunded 7"
    runs = recorded_runs(log)
    assert len(runs) == 2
    assert [flag_value(argv, "--max-budget-usd") for argv in runs] == ["0.25", "0.25"]


# --- row 60 -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "defers"),
    [
        (ToolPolicy(effect="read"), False),
        (ToolPolicy(effect="read", requires_approval=True), True),
        (None, True),
    ],
)
async def test_row60_a_policy_named_mcp_server_tool_decides_its_approval(
    tmp_path: Path, policy: ToolPolicy | None, defers: bool
) -> None:
    """Row 60: `mcp__ext__read_balance` in the policies decides the external tool's
    approval. `ext` is the ledger MCP server over HTTP, outside the adapter (an
    in-process SDK server in `mcp_servers` is refused: its tools go in
    `custom_tools`); its `readOnlyHint` does not count, only the policy does."""
    ledger = JsonLedger(tmp_path / "ext-ledger.jsonl")
    policies = {} if policy is None else {"mcp__ext__read_balance": policy}
    async with http_server(ledger.path) as url:
        runner = ClaudeAgentRunner(
            ClaudeAgentDefinition(
                options=fake_options(
                    tmp_path,
                    tools=[],
                    mcp_servers={
                        "ext": {
                            "type": "http",
                            "url": url,
                            "headers": AUTH,
                            "alwaysLoad": True,
                        }
                    },
                ),
                tool_policies=policies,
            )
        )
        driver = SessionDriver(runner)
        seen_before_approval: list[int] = []

        def decide(call: ToolCall) -> bool:
            seen_before_approval.append(ledger.count("mcp_read"))
            return True

        result = await driver.turn(
            'dex-script: call mcp__ext__read_balance {"account": "a"}', decide=decide
        )
    assert result.text == "done: balance of a: 0"
    assert [e["account"] for e in ledger.entries("mcp_read")] == ["a"]
    if defers:
        [call] = result.calls
        assert (call.tool_name, call.metadata["kind"]) == (
            "mcp__ext__read_balance",
            "cli",
        )
        assert call.policy == (policy or ToolPolicy(effect="unclassified"))
        assert call.policy.needs_approval
        # It waited for approval, then ran in the resumed segment.
        assert seen_before_approval == [0]
        assert len(result.segments) == 2
    else:
        assert result.calls == [] and seen_before_approval == []
        assert len(result.segments) == 1
        [started] = driver.sink.of_type("tool_call_started")
        assert started.data["tool_name"] == "mcp__ext__read_balance"


# --- rows 79, 83, 84 ----------------------------------------------------------


def bash_agent(
    base: Path,
    permission: PermissionRecorder,
    *,
    policies: dict[str, ToolPolicy] | None = None,
    **options: object,
) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(base, **options),
            tool_policies=policies or {},
            claude_code_tool_permission=permission,
        )
    )


async def test_row79_a_write_policy_from_the_permission_callback_waits_for_approval(
    tmp_path: Path,
) -> None:
    """Row 79: the callback's write policy overrides a read policy; the call waits."""
    marker = tmp_path / "cwd" / "written"
    permission = PermissionRecorder(ToolPolicy(effect="non_idempotent_write"))
    driver = SessionDriver(
        bash_agent(tmp_path, permission, policies={"Bash": ToolPolicy(effect="read")})
    )
    existed_at_approval: list[bool] = []

    def decide(call: ToolCall) -> bool:
        existed_at_approval.append(marker.exists())
        return True

    result = await driver.turn(bash("echo x > written; echo wrote"), decide=decide)
    [call] = result.calls
    assert call.policy == ToolPolicy(effect="non_idempotent_write")
    assert call.policy.needs_approval
    assert existed_at_approval == [False]
    assert marker.exists()
    assert result.text == "done: wrote"
    assert [name for name, _ in permission.asked] == ["Bash"]

    # Without an answer the session's read policy stands: the call runs inline.
    permission.answer = None
    inline = await driver.turn(bash("echo inline"))
    assert inline.calls == [] and inline.text == "done: inline"
    assert [name for name, _ in permission.asked] == ["Bash", "Bash"]


async def test_row83_the_permission_callback_is_never_asked_for_a_source_tool(
    tmp_path: Path,
) -> None:
    """Row 83: a ConnectorToolSource's calls defer without asking the callback."""
    ledger_path = str(tmp_path / "ledger.jsonl")
    permission = PermissionRecorder(None)
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(tmp_path),
            tool_sources=[
                ConnectorToolSource(fake_ledger_connector_tools(ledger_path))
            ],
            tool_policies={"Bash": ToolPolicy(effect="read")},
            claude_code_tool_permission=permission,
        )
    )
    driver = SessionDriver(runner)
    query = await driver.turn('dex-script: call read_balance {"account": "a"}')
    assert query.text == "done: balance of a: 0"
    [call] = query.calls
    assert call.metadata["kind"] == "source"
    transfer = await driver.turn(
        'dex-script: call transfer {"account": "a", "amount": 5}'
    )
    assert transfer.text == "done: transferred 5 to a"
    assert [c.tool_name for c in transfer.calls] == ["transfer"]
    assert transfer.calls[0].policy.needs_approval
    assert JsonLedger(ledger_path).count("ledger_entry") == 1
    assert permission.asked == []
    # The same callback is asked about a tool inside the CLI.
    await driver.turn(bash("echo hi"))
    assert permission.asked == [("Bash", {"command": "echo hi"})]


async def test_row84_the_permission_callback_is_not_asked_about_a_resumed_call(
    tmp_path: Path,
) -> None:
    """Row 84: the resumed segment answers the pending call from its record."""
    permission = PermissionRecorder(
        ToolPolicy(effect="idempotent_write", requires_approval=True)
    )
    driver = SessionDriver(bash_agent(tmp_path, permission))
    result = await driver.turn(bash("echo resumed"))
    assert len(result.segments) == 2
    [call] = result.calls
    assert call.policy == ToolPolicy(effect="idempotent_write", requires_approval=True)
    assert result.text == "done: resumed"
    # Asked once, when the call was new; never for the resumed call.
    assert permission.asked == [("Bash", {"command": "echo resumed"})]


async def test_row84_the_callback_is_not_asked_when_the_hooks_are_skipped(
    tmp_path: Path,
) -> None:
    """Row 84, through can_use_tool: the CLI skips PreToolUse for the resumed call."""
    permission = PermissionRecorder(None)
    driver = SessionDriver(
        bash_agent(
            tmp_path,
            permission,
            env={FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV: "1"},
        )
    )
    result = await driver.turn(bash("echo skipped"))
    assert len(result.segments) == 2
    assert result.text == "done: skipped"
    assert permission.asked == [("Bash", {"command": "echo skipped"})]


# --- row 133 ------------------------------------------------------------------


async def test_row133_a_resumed_cli_call_that_fails_finishes_failed_once(
    tmp_path: Path,
) -> None:
    """Row 133: the CLI's error result of the resumed call is its one finished event."""
    driver = SessionDriver(bash_agent(tmp_path, PermissionRecorder(None)))
    result = await driver.turn(bash("echo broken; exit 3"))
    [call] = result.calls
    [record] = result.records
    assert record.finished_by_resumed_turn
    assert record.output == APPROVED_CLI_TOOL_OUTPUT
    finished = driver.sink.of_type("tool_call_finished")
    assert [(e.data["tool_call_id"], e.data["status"]) for e in finished] == [
        (call.tool_call_id, "failed")
    ]
    assert "Exit code 3" in str(finished[0].data["output"])


def resumed_cli_segment(tmp_path: Path) -> tuple[Segment, SessionDriver]:
    """A resumed segment whose pending call is an approved Bash call."""
    options = ClaudeAgentOptions(cli_path="/nonexistent/claude", cwd=str(tmp_path))
    driver = SessionDriver(ClaudeAgentRunner(ClaudeAgentDefinition(options=options)))
    record = ToolRecord(
        tool_call_id="b1",
        tool_name="Bash",
        arguments={"command": "ls"},
        status="finished",
        output=APPROVED_CLI_TOOL_OUTPUT,
        finished_by_resumed_turn=True,
    )
    resume = ResumeState(
        run_state={
            "session_id": "s",
            "cwd": str(tmp_path),
            "deferred": {"tool_use_id": "b1", "kind": "cli", "tool_name": "Bash"},
        },
        messages=(),
        records=(record,),
    )
    context = driver.context(turn_id="turn-1", step=2, pending=(), resume=resume)
    setup = SegmentSetup(
        options=options, tools={}, server_name="tools", policies={}, permission=None
    )
    segment = Segment(setup, context)
    segment._pending = PendingCall(  # pyright: ignore[reportPrivateUsage]
        tool_use_id="b1", kind="cli", tool_name="Bash", record=record
    )
    segment._gate.decide(  # pyright: ignore[reportPrivateUsage]
        "b1",
        Decision(
            kind="replay", tool_name="Bash", arguments=record.arguments, record=record
        ),
    )
    return segment, driver


def test_row133_a_segment_without_the_resumed_result_writes_outcome_unknown(
    tmp_path: Path,
) -> None:
    """Row 133: no tool result for the approved call by the segment's end."""
    segment, driver = resumed_cli_segment(tmp_path)
    segment._finish_resumed_cli_call()  # pyright: ignore[reportPrivateUsage]
    assert [(e.type, e.data) for e in driver.sink.events] == [
        (
            "tool_call_finished",
            {
                "tool_call_id": "b1",
                "tool_name": "Bash",
                "status": "outcome_unknown",
                "output": "",
            },
        )
    ]


@pytest.mark.parametrize(
    ("is_error", "status"), [(False, "finished"), (True, "failed")]
)
def test_row133_the_resumed_result_is_the_only_finished_event(
    tmp_path: Path, is_error: bool, status: str
) -> None:
    """Row 133: with the CLI's result seen, the segment's end adds nothing."""
    segment, driver = resumed_cli_segment(tmp_path)
    segment._observe(  # pyright: ignore[reportPrivateUsage]
        UserMessage(
            content=[
                ToolResultBlock(tool_use_id="b1", content="out", is_error=is_error)
            ]
        )
    )
    segment._finish_resumed_cli_call()  # pyright: ignore[reportPrivateUsage]
    assert [(e.type, e.data["status"]) for e in driver.sink.events] == [
        ("tool_call_finished", status)
    ]


# --- row 156 ------------------------------------------------------------------


def test_row156_main_conversation_fallback_keeps_request_model_drops_response_model() -> (
    None
):
    """Row 156: two models without a subagent: init model requested, no response model."""
    observer, result = fallback_segment(first_answer_model="claude-opus-dated")
    assert observer.metadata(result, "opus") == ModelCallMetadata(
        request_model="claude-opus", response_model=None, provider_name="anthropic"
    )


# --- row 169 ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "terminal_reason", "deferred"),
    [
        ("tool_deferred", None, True),
        (None, "tool_deferred", True),
        ("end_turn", None, False),
        ("end_turn", "completed", False),
    ],
)
def test_row169_a_re_deferred_call_without_terminal_reason_is_a_deferral(
    tmp_path: Path, stop_reason: str | None, terminal_reason: str | None, deferred: bool
) -> None:
    """Row 169: stop reason `tool_deferred` alone (no terminal reason) defers."""
    options = ClaudeAgentOptions(cli_path="/nonexistent/claude", cwd=str(tmp_path))
    driver = SessionDriver(ClaudeAgentRunner(ClaudeAgentDefinition(options=options)))
    context = driver.context(turn_id="turn-1", step=2, pending=(), resume=None)
    setup = SegmentSetup(
        options=options, tools={}, server_name="tools", policies={}, permission=None
    )
    segment = Segment(setup, context)
    call = ToolCall(
        tool_call_id="b2",
        tool_name="Bash",
        arguments={"command": "ls"},
        policy=ToolPolicy(effect="unclassified"),
        metadata={"kind": "cli", "claude_tool_name": "Bash"},
    )
    segment._gate.defer(  # pyright: ignore[reportPrivateUsage]
        "b2",
        Decision(kind="defer", tool_name="Bash", arguments={"command": "ls"}),
        call,
    )
    result = ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=1,
        session_id="s",
        stop_reason=stop_reason,
        terminal_reason=terminal_reason,
        result="text",
        deferred_tool_use=DeferredToolUse(
            id="b2", name="Bash", input={"command": "ls"}
        ),
    )
    outcome = segment._outcome(  # pyright: ignore[reportPrivateUsage]
        result, ClaudeTranscriptStore(session_id="s"), [], [], str(tmp_path)
    )
    if deferred:
        assert isinstance(outcome, ToolCallsRequested)
        assert outcome.calls == (call,)
        assert outcome.run_state == {
            "session_id": "s",
            "cwd": str(tmp_path),
            "deferred": {"tool_use_id": "b2", "kind": "cli", "tool_name": "Bash"},
        }
    else:
        assert isinstance(outcome, TurnCompleted)
        assert outcome.final_text == "text"


# --- row 171 ------------------------------------------------------------------


async def test_row171_a_resumed_segment_runs_in_the_cwd_of_its_run_state(
    tmp_path: Path,
) -> None:
    """Row 171: the options factory's cwd changes; the resumed call runs in the first."""
    built: list[str] = []

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        cwd = tmp_path / f"cwd-{len(built)}"
        cwd.mkdir()
        built.append(str(cwd.resolve()))
        return fake_options(tmp_path, cwd=str(cwd.resolve()))

    driver = SessionDriver(ClaudeAgentRunner(ClaudeAgentDefinition(options=options)))
    result = await driver.turn(bash("pwd"))
    assert len(built) == 2 and built[0] != built[1]
    deferred = result.segments[0]
    assert isinstance(deferred, ToolCallsRequested)
    assert deferred.run_state["cwd"] == built[0]
    assert result.text == f"done: {built[0]}"
    # A new turn starts in the factory's cwd and still sees the committed history.
    recalled = await driver.turn("dex-script: recall")
    assert len(built) == 3
    assert recalled.text == f"recalled:\n{bash('pwd')}"


# --- row 203 ------------------------------------------------------------------


def local_transcripts(config_dir: Path) -> list[Path]:
    return sorted((config_dir / "projects").rglob("*.jsonl"))


async def say_refund_recall_without_local_transcripts(
    driver: SessionDriver,
    ledger: Ledger,
    config_dir: Path,
    decide: Callable[[ToolCall], bool],
    *,
    cli: str,
) -> None:
    """Say hi, refund (approved by `decide`) and recall, deleting the `cli`'s
    projects under `config_dir` after each turn: the recall holds both prompts."""
    first = await driver.turn("dex-script: say hi")
    assert first.text == "said: hi"
    assert local_transcripts(config_dir), f"the {cli} wrote no local transcript"
    shutil.rmtree(config_dir / "projects")
    refund = await driver.turn(REFUND, decide=decide)
    assert refund.text == "done: refunded 7"
    assert ledger.refunds == [{"orderId": "7"}]
    shutil.rmtree(config_dir / "projects", ignore_errors=True)
    recalled = await driver.turn("dex-script: recall")
    assert recalled.text == f"recalled:\ndex-script: say hi\n{REFUND}"


async def test_row203_resume_without_the_local_transcript_fake_cli(
    tmp_path: Path,
) -> None:
    """Row 203: the CLI's own transcript under CLAUDE_CONFIG_DIR is never read."""
    config_dir = Path(os.environ["CLAUDE_CONFIG_DIR"])
    ledger = Ledger()
    driver = SessionDriver(refund_runner(tmp_path, ledger))

    def decide(call: ToolCall) -> bool:
        # Between the deferring and the resumed segment: a resumed session runs
        # from the SDK's temporary config dir, so this one must stay unread.
        (config_dir / "projects").mkdir(parents=True, exist_ok=True)
        shutil.rmtree(config_dir / "projects")
        return True

    await say_refund_recall_without_local_transcripts(
        driver, ledger, config_dir, decide, cli="fake CLI"
    )


async def test_row203_resume_without_the_local_transcript_real_cli(
    hermetic: Hermetic,
) -> None:
    """Row 203 with the real CLI: delete its projects between turns and segments."""
    config_dir = Path(hermetic.env["CLAUDE_CONFIG_DIR"])
    ledger = Ledger()
    driver = SessionDriver(
        ClaudeAgentRunner(
            ClaudeAgentDefinition(
                options=hermetic.options(),
                custom_tools=ledger.tools(),
                tool_policies={
                    "create_refund": ToolPolicy(effect="non_idempotent_write")
                },
            )
        )
    )

    def decide(call: ToolCall) -> bool:
        shutil.rmtree(config_dir / "projects", ignore_errors=True)
        return True

    await say_refund_recall_without_local_transcripts(
        driver, ledger, config_dir, decide, cli="CLI"
    )

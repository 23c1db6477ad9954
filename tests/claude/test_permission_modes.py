"""`permission_mode` is an allow-list: unset, `default` or `dontAsk`; every other mode is refused.

One test per value of the SDK's `PermissionMode` (read from the SDK, so a mode
a new release adds is refused until it is judged): in the three allowed modes
the CLI asks the adapter about each call, so the session's policies decide it;
the others run calls unasked (`bypassPermissions`, `acceptEdits`, `auto`) or
change what runs (`plan`). A refusal is an `InvalidOptionError`, a `UserError`
(and still a `TypeError`), that names the allowed modes, and it fails the
attempt before any CLI starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
)
from claude_agent_sdk.types import PermissionMode

from dex_agents import InvalidOptionError, UserError
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._options import ALLOWED_PERMISSION_MODES, check_options
from dex_agents.session import (
    ToolCallsRequested,
    ToolPolicy,
)
from support.claude_harness import (
    Ledger,
    SessionDriver,
    fake_options,
)
from support.cli_argv_recorder import flag_values, recording_cli

pytestmark = pytest.mark.timeout(60)

ALLOWED = (None, "default", "dontAsk")
SDK_MODES: tuple[str, ...] = get_args(PermissionMode)
REFUSED = [mode for mode in SDK_MODES if mode not in ALLOWED]


def never(_name: str) -> bool:
    return False


def check(mode: Any) -> None:
    check_options(
        ClaudeAgentOptions(permission_mode=mode), server_name="tools", must_defer=never
    )


def test_the_sdk_modes_are_the_ones_judged_here() -> None:
    # A mode a new SDK adds is refused (it is not on the allow-list) and shows here.
    assert set(SDK_MODES) == {
        "default",
        "acceptEdits",
        "plan",
        "bypassPermissions",
        "dontAsk",
        "auto",
    }
    assert ALLOWED_PERMISSION_MODES == ALLOWED


@pytest.mark.parametrize("mode", ALLOWED, ids=str)
def test_an_allowed_mode_passes(mode: Any) -> None:
    check(mode)


@pytest.mark.parametrize("mode", REFUSED)
def test_every_other_mode_is_refused_naming_the_allowed_ones(mode: str) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        check(mode)
    err = caught.value
    assert isinstance(err, UserError) and isinstance(err, TypeError)
    message = str(err)
    assert f"`permission_mode` {mode!r} is not allowed" in message
    for allowed in ("'default'", "'dontAsk'", "unset (None)"):
        assert allowed in message, message
    assert "approval gate decides each tool call" in message, "it says why"


@pytest.mark.parametrize("mode", ["nonsense", "", "Default", 1])
def test_a_mode_the_sdk_does_not_know_is_refused_too(mode: Any) -> None:
    with pytest.raises(InvalidOptionError, match="'default' or 'dontAsk'"):
        check(mode)


@pytest.mark.parametrize(
    "flag",
    [
        "permission-mode",
        "dangerously-skip-permissions",
        "allow-dangerously-skip-permissions",
    ],
)
def test_the_mode_cannot_come_in_by_a_raw_cli_flag(flag: str) -> None:
    options = ClaudeAgentOptions(extra_args={flag: "plan"})
    with pytest.raises(InvalidOptionError, match=f"extra_args\\[{flag!r}\\]"):
        check_options(options, server_name="tools", must_defer=never)


@pytest.mark.parametrize("mode", REFUSED)
async def test_a_refused_mode_fails_the_attempt_before_any_cli_starts(
    mode: Any,
) -> None:
    # A factory's options are checked per attempt (options given as they are
    # are refused when the agent is defined: tests/claude_defs/).
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=lambda _context: ClaudeAgentOptions(
                permission_mode=mode, cli_path="/nonexistent/claude"
            )
        )
    )
    with pytest.raises(InvalidOptionError, match="is not allowed"):
        await SessionDriver(runner).turn("hello")


async def test_row160_permission_mode_dont_ask_reaches_every_segments_cli(
    tmp_path: Path,
) -> None:
    """Row 160: `permission_mode="dontAsk"` is passed through to the CLI's argv on the
    deferring and the resumed segment, and the write still defers and resumes."""
    script, log = recording_cli(tmp_path)
    ledger = Ledger()
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(
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

"""`make cli-compat`: the Claude Code CLI behaviors the adapter relies on, pass or fail.

One pytest run, in this process, of the real-CLI tests that pin those behaviors
down (`BEHAVIORS`), against the CLI bundled in the installed claude-agent-sdk or
the binary given with `--cli`. The binary reaches the test fixtures and the
adapter's own segments through `DEX_AGENTS_CLAUDE_CLI`; the tests run with
`DEX_AGENTS_REAL_CLI_REQUIRED=1`, so a CLI that cannot start fails them.

Then it prints the CLI's `--version` and a table: each behavior, its tests, and
whether they all passed. Exit status: 0 when every behavior passed, 1 when a
test failed, was skipped or no longer exists, 2 when the CLI cannot be run.

Usage (from the repository root):

    .venv/bin/python tools/cli_compat.py [--cli PATH] [--list] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dex_agents.testing._hermetic import CLI_PATH_VARIABLE, bundled_cli_path

ROOT = Path(__file__).resolve().parents[1]

_CONTRACT = "tests/real_cli/test_cli_contract.py::"
_QUERY = "tests/real_cli/test_real_claude_cli.py::"
_PAIRED = "tests/kit/test_fake_claude_cli.py::"
_ADAPTER = "tests/real_cli/test_real_cli.py::"
_PROCESS = "tests/real_cli/test_real_cli_process.py::"
_LARGE = "tests/claude/test_large_messages.py::"


@dataclass(frozen=True, slots=True)
class Behavior:
    """Something the adapter relies on the CLI for, and the tests that check it."""

    name: str
    tests: tuple[str, ...]
    """pytest node IDs, relative to the repository root."""


BEHAVIORS: tuple[Behavior, ...] = (
    Behavior(
        "The CLI under test is the one that answers (init version = --version), "
        "and the adapter's segments run it too",
        (
            _CONTRACT + "test_the_cli_under_test_is_the_one_that_answers",
            _CONTRACT
            + "test_one_variable_names_the_cli_of_the_tests_and_of_the_adapter",
        ),
    ),
    Behavior(
        "Plain query(): stream-json answer; only POST /v1/messages, "
        "NO_PROXY honored, no other traffic",
        (_QUERY + "test_say_hello",),
    ),
    Behavior(
        "Init and result fields as the fake CLI mimics them; "
        "claude_code_version pinned to 2.1.332",
        (_PAIRED + "test_say[real]",),
    ),
    Behavior(
        "Text deltas (stream events) become the adapter's text_delta events",
        (_ADAPTER + "test_read_tool_runs_inline_and_next_turn_resumes",),
    ),
    Behavior(
        "Usage and cost in the result: usage per segment, model_usage and "
        "total_cost_usd per session (cost-state)",
        (
            _QUERY + "test_say_hello",
            _PAIRED + "test_defer_then_resume_runs_the_call_once[real]",
            "tests/engine/test_claude_tracing.py::test_chat_spans_of_answer_read_turn_and_deferred_write",
        ),
    ),
    Behavior(
        "SDK MCP tools: tools/call carries _meta claudecode/toolUseId; "
        "PreToolUse input fields",
        (
            _PAIRED + "test_inline_tool_gets_the_tool_use_id[real]",
            _QUERY + "test_custom_tool_runs_once",
        ),
    ),
    Behavior(
        "Two tool_use blocks in one reply: one AssistantMessage per block, "
        "same message_id",
        (_QUERY + "test_two_calls_in_one_reply",),
    ),
    Behavior(
        'PreToolUse "defer" ends the segment: tool_deferred + deferred_tool_use',
        (
            _PAIRED + "test_defer_then_resume_runs_the_call_once[real]",
            _ADAPTER + "test_approved_write_resumes_without_prompt_and_runs_once[None]",
        ),
    ),
    Behavior(
        "The deferral records the model's input; updatedInput applies only "
        "when the call runs",
        (
            _PAIRED + "test_deferral_keeps_the_original_input[real]",
            _ADAPTER + "test_application_hook_rewrites_the_deferred_input",
            _ADAPTER + "test_bash_runs_the_command_an_application_hook_rewrote",
        ),
    ),
    Behavior(
        "Transcript mirrored to the SessionStore: hook_deferred_tool; "
        "last-prompt, mode, cost-state after the result",
        (
            _PAIRED + "test_defer_then_resume_runs_the_call_once[real]",
            _PAIRED + "test_two_deferred_calls_name_the_last[real]",
        ),
    ),
    Behavior(
        "Resume of a deferred call without a prompt (stdin open until the "
        'result): runs once, then "Continue from where you left off."',
        (
            _PAIRED + "test_defer_then_resume_runs_the_call_once[real]",
            _ADAPTER
            + "test_approved_write_resumes_without_prompt_and_runs_once[default]",
            _ADAPTER + "test_approved_bash_runs_in_the_resumed_segment",
            "tests/crashes/test_claude_crashes.py::test_turn_deferred_on_one_worker_resumes_on_another_after_sigkill",
        ),
    ),
    Behavior(
        "--await-initialize accepted on first and resumed segments",
        (
            _ADAPTER + "test_read_tool_runs_inline_and_next_turn_resumes",
            _ADAPTER + "test_approved_write_resumes_without_prompt_and_runs_once[None]",
        ),
    ),
    Behavior(
        "PreToolUse runs again on resume, with the original input and tool_use_id",
        (
            _PAIRED + "test_defer_then_resume_runs_the_call_once[real]",
            _PAIRED + "test_deferral_keeps_the_original_input[real]",
            _PAIRED + "test_refused_second_call_is_called_again_alone[real]",
        ),
    ),
    Behavior(
        "Several deferrals in one reply: all recorded, only the last named and resumed",
        (_PAIRED + "test_two_deferred_calls_name_the_last[real]",),
    ),
    Behavior(
        'One deferral per segment: a hook deny reaches the model as "PreToolUse:'
        '<tool> hook error: ...", the refused call comes again',
        (
            _PAIRED + "test_hook_denial_reaches_the_model_with_a_prefix[real]",
            _PAIRED + "test_refused_second_call_is_called_again_alone[real]",
            _ADAPTER + "test_two_writes_in_one_reply_run_one_per_segment",
            "tests/real_cli/test_real_cli_connectors.py::"
            "test_two_connector_writes_in_one_reply_under_dont_ask",
        ),
    ),
    Behavior(
        "A resumed call deferred again: stop_reason tool_deferred, no terminal_reason",
        (_PAIRED + "test_resumed_call_can_be_deferred_again[real]",),
    ),
    Behavior(
        'PreToolUse "ask" reaches can_use_tool; its deny text reaches the model as is',
        (
            _PAIRED + "test_ask_goes_to_can_use_tool[real]",
            _ADAPTER + "test_rejected_write_reaches_the_model_verbatim",
            _ADAPTER + "test_rejected_bash_is_denied_with_the_rejection",
        ),
    ),
    Behavior(
        "Permission modes unset, default, dontAsk all defer and resume; dontAsk "
        "denies an undecided call unasked",
        (
            _PAIRED + "test_dont_ask_denies_an_undecided_call_without_asking[real]",
            _ADAPTER + "test_approved_write_resumes_without_prompt_and_runs_once[None]",
            _ADAPTER
            + "test_approved_write_resumes_without_prompt_and_runs_once[default]",
            _ADAPTER
            + "test_approved_write_resumes_without_prompt_and_runs_once[dontAsk]",
        ),
    ),
    Behavior(
        "Built-in Bash: runs in the cwd; deferred, approved, run by the resumed segment",
        (
            _PAIRED + "test_bash_runs_in_the_working_directory[real]",
            _ADAPTER + "test_approved_bash_runs_in_the_resumed_segment",
        ),
    ),
    Behavior(
        "Resume with a prompt from the SessionStore alone (local transcript deleted)",
        (
            _QUERY + "test_recall_across_a_resumed_session",
            _PAIRED + "test_resumed_session_recalls_earlier_prompts[real]",
            "tests/claude/test_adapter_rows.py::"
            "test_row203_resume_without_the_local_transcript_real_cli",
        ),
    ),
    Behavior(
        "last-prompt entries dropped: the next turn after a resumed call sees "
        "the whole history",
        (
            _CONTRACT + "test_next_turn_after_a_resumed_call_sees_the_whole_history",
            "tests/real_cli/test_readme_example.py::test_support_agent_example",
            "tests/kit/test_scripted_followups.py::"
            "test_thanks_after_a_refund_is_answered_with_text_through_the_real_cli",
        ),
    ),
    Behavior(
        'Resume of an unknown session: "No conversation found with session ID"',
        (_PAIRED + "test_resume_of_an_unknown_session_fails[real]",),
    ),
    Behavior(
        "Resume without the SDK server: tool_deferred_unavailable, exit code 1",
        (_PAIRED + "test_resume_without_the_server_is_unavailable[real]",),
    ),
    Behavior(
        "An error result (error_max_turns) fails the attempt, not retryable",
        (_PROCESS + "test_an_error_result_fails_the_attempt",),
    ),
    Behavior(
        "The CLI under the launcher (setsid + setpriv, or Python) dies with a "
        "cancelled attempt or a SIGKILLed worker",
        (
            _PROCESS + "test_a_cancelled_attempt_kills_the_cli[util-linux]",
            _PROCESS + "test_a_cancelled_attempt_kills_the_cli[python]",
            _PROCESS + "test_the_cli_dies_with_a_sigkilled_worker[util-linux]",
            _PROCESS + "test_the_cli_dies_with_a_sigkilled_worker[python]",
            "tests/crashes/test_claude_crashes.py::test_sigkill_during_run_model_reruns_the_segment_and_kills_the_cli",
        ),
    ),
    Behavior(
        "Image input: user images reach the model; tool-result images replay",
        (
            _ADAPTER + "test_user_image_reaches_the_model_and_is_stored_by_reference",
            _ADAPTER + "test_a_runner_without_a_store_fails_on_stored_image_references",
            _ADAPTER
            + "test_deferred_tool_result_images_replay_and_are_stored_by_reference",
        ),
    ),
    Behavior(
        "Large prompts (3 MB, 20 MB) answered whole: the echo fits max_buffer_size; "
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS read",
        (
            _LARGE
            + "test_a_large_message_is_answered_whole_and_survives_the_next_turn[3MB]",
            _LARGE
            + "test_a_large_message_is_answered_whole_and_survives_the_next_turn[20MB]",
            _LARGE
            + "test_max_buffer_size_is_the_adapters_unless_the_options_set_it[adapter-default]",
            _LARGE
            + "test_max_buffer_size_is_the_adapters_unless_the_options_set_it[application-value]",
            "tests/real_cli/test_large_messages_durable.py::test_3_mb_then_20_mb_messages_are_answered_whole_in_a_durable_session",
        ),
    ),
    Behavior(
        'Too large: HTTP 413 and "Prompt is too long" fail the segment with a '
        "clear error",
        (
            _LARGE + "test_a_message_over_the_api_limit_fails_with_a_clear_error",
            _LARGE
            + "test_a_message_over_the_model_context_window_fails_with_a_clear_error",
            "tests/real_cli/test_large_messages_durable.py::test_a_message_over_32_mib_is_refused_and_nothing_is_written",
            "tests/real_cli/test_large_messages_durable.py::test_a_message_the_api_refuses_fails_its_turn_once_and_the_next_is_answered",
        ),
    ),
    Behavior(
        "Durable end to end: the README's support agent on Temporal",
        ("tests/real_cli/test_readme_example.py::test_support_agent_example",),
    ),
)


Outcome = Literal["passed", "failed", "skipped", "missing"]
_MARK: dict[Outcome, tuple[str, str]] = {
    "passed": ("✓", "green"),
    "failed": ("✗", "red"),
    "skipped": ("-", "yellow"),
    "missing": ("?", "red"),
}


@dataclass(eq=False)  # pluggy keeps plugins in sets
class Recorder:
    """A pytest plugin: runs only `wanted` and keeps each test's outcome."""

    wanted: set[str]
    outcomes: dict[str, Outcome] = field(default_factory=lambda: {})
    reasons: dict[str, str] = field(default_factory=lambda: {})

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Keep the wanted tests, in file order; deselect the rest."""
        dropped = [i for i in items if i.nodeid not in self.wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.nodeid in self.wanted]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A failure in any phase fails the test; a skip skips it."""
        if report.nodeid not in self.wanted or self.outcomes.get(report.nodeid) in (
            "failed",
            "skipped",
        ):
            return
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
            self.reasons[report.nodeid] = f"{report.when}: {_reason(report)}"
        elif report.skipped:
            self.outcomes[report.nodeid] = "skipped"
            self.reasons[report.nodeid] = _reason(report)
        elif report.when == "call":
            self.outcomes[report.nodeid] = "passed"

    def outcome(self, nodeid: str) -> Outcome:
        """How `nodeid` ended: "missing" if it never ran (not collected)."""
        return self.outcomes.get(nodeid, "missing")


def _reason(report: pytest.TestReport) -> str:
    """The first line of why a test failed or skipped."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = str(getattr(crash, "message", None) or longrepr)
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= 160 else first[:157] + "..."


def all_tests() -> list[str]:
    """Every node ID of `BEHAVIORS`, once, in order of first use."""
    return list(dict.fromkeys(t for b in BEHAVIORS for t in b.tests))


def cli_version(cli: Path) -> str:
    """What `cli --version` prints.

    Raises:
        RuntimeError: The CLI did not run or did not exit 0.
    """
    try:
        done = subprocess.run(
            [str(cli), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError(f"{cli} --version: {e}") from e
    if done.returncode != 0:
        raise RuntimeError(f"{cli} --version exited {done.returncode}: {done.stderr}")
    return done.stdout.strip()


def run_tests(cli: Path, extra: list[str]) -> tuple[Recorder, int]:
    """Run the tests of `BEHAVIORS` against `cli`; the recorder and pytest's status."""
    tests = all_tests()
    recorder = Recorder(wanted=set(tests))
    files = list(dict.fromkeys(t.split("::", 1)[0] for t in tests))
    os.environ[CLI_PATH_VARIABLE] = str(cli)
    os.environ["DEX_AGENTS_REAL_CLI_REQUIRED"] = "1"
    os.chdir(ROOT)
    # This module imported anyio (through the SDK) before pytest loads its plugin.
    quiet = [
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]
    status = pytest.main(["-q", *quiet, *files, *extra], plugins=[recorder])
    return recorder, int(status)


def table(version: str, cli: Path, recorder: Recorder) -> tuple[Table, int]:
    """The behaviors with their tests' outcomes, and how many behaviors passed."""
    out = Table(
        title=Text(f"Claude Code CLI {version}"),
        caption=Text(f"{cli}\n✓ passed  ✗ failed  - skipped  ? not collected"),
        show_lines=True,
    )
    out.add_column("Behavior the adapter relies on", ratio=1)
    out.add_column("Tests", no_wrap=True)
    out.add_column("Result", no_wrap=True)
    passed = 0
    for behavior in BEHAVIORS:
        cell = Text()
        for n, nodeid in enumerate(behavior.tests):
            mark, style = _MARK[recorder.outcome(nodeid)]
            if n:
                cell.append("\n")
            cell.append(f"{mark} ", style=style)
            cell.append(nodeid.rsplit("::", 1)[-1])
        ok = all(recorder.outcome(t) == "passed" for t in behavior.tests)
        passed += ok
        result = Text("pass", style="green") if ok else Text("FAIL", style="bold red")
        out.add_row(Text(behavior.name), cell, result)
    return out, passed


def main(argv: list[str] | None = None) -> int:
    """Run the check; the process exit status."""
    parser = argparse.ArgumentParser(
        prog="cli_compat",
        description="Check the Claude Code CLI behaviors the adapter relies on.",
    )
    parser.add_argument(
        "--cli",
        type=Path,
        help="the claude binary to check (default: the one bundled in the "
        "installed claude-agent-sdk)",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print each behavior's tests and exit, running nothing",
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=140)

    if args.list:
        for behavior in BEHAVIORS:
            console.print(Text(behavior.name, style="bold"))
            for nodeid in behavior.tests:
                console.print(f"  {nodeid}", markup=False, highlight=False)
        return 0

    os.environ.pop(CLI_PATH_VARIABLE, None)
    cli = args.cli.absolute() if args.cli is not None else bundled_cli_path()
    if cli is None:
        console.print("No bundled Claude Code CLI: pass --cli PATH (CLI=PATH).")
        return 2
    try:
        version = cli_version(cli)
    except RuntimeError as e:
        console.print(f"[red]Cannot run the CLI[/red]: {e}")
        return 2

    started = time.monotonic()
    recorder, status = run_tests(cli, list(args.pytest_args))
    elapsed = time.monotonic() - started

    console.print()
    console.print(f"Claude Code CLI: {version}  ({cli})", markup=False, highlight=False)
    out, passed = table(version, cli, recorder)
    console.print(out)
    failures = [
        t for t in all_tests() if recorder.outcome(t) != "passed"
    ]  # in map order
    for nodeid in failures:
        why = recorder.reasons.get(nodeid, "not collected (renamed or removed?)")
        console.print(
            f"[red]{recorder.outcome(nodeid)}[/red] {escape(nodeid)}: {escape(why)}",
            highlight=False,
        )
    counts = {o: 0 for o in _MARK}
    for nodeid in all_tests():
        counts[recorder.outcome(nodeid)] += 1
    console.print(
        f"{passed}/{len(BEHAVIORS)} behaviors pass; tests: "
        + ", ".join(f"{n} {o}" for o, n in counts.items() if n or o == "passed")
        + f" (pytest exit {status}); {elapsed:.0f} s",
        highlight=False,
    )
    return 0 if passed == len(BEHAVIORS) else 1


if __name__ == "__main__":
    sys.exit(main())

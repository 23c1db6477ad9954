"""A CLI that dies says why: its last stderr lines, bounded and with credentials redacted.

The SDK's own error says only "exit code 1 ... Check stderr output for
details". The segment reads the CLI's stderr itself (the SDK's `stderr`
callback), keeps the last `TAIL_LINES` lines and puts at most `TAIL_BYTES` of
them in the failure, with API keys, tokens and authorization values made
`***`; the application's own `stderr` callback still gets every line as it was.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeAgentOptions
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents import SessionError
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._stderr import TAIL_BYTES, TAIL_LINES, StderrTail, redacted
from support.claude_harness import SessionDriver

pytestmark = pytest.mark.timeout(120)

SECRETS = [
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
    "sk-proj-0123456789abcdefghijkl",
    "oauth-token-value-0123456789",
    "bearer-token-0123456789abcdef",
    "hunter2hunter2",
]
CREDENTIAL_LINES = [
    f"ANTHROPIC_API_KEY={SECRETS[0]}",
    f"OPENAI key {SECRETS[1]} refused",
    f"CLAUDE_CODE_OAUTH_TOKEN: {SECRETS[2]}",
    f"request headers: Authorization: Bearer {SECRETS[3]}",
    f'{{"x-api-key": "{SECRETS[0]}", "method": "POST"}}',
    f"proxy https://user:{SECRETS[4]}@proxy.example:3128 refused",
]


def dying_cli(tmp_path: Path, stderr_lines: list[str], *, code: int = 1) -> Path:
    """A `cli_path` that writes `stderr_lines` to stderr and exits with `code`."""
    script = tmp_path / "dying-claude"
    body = "".join(f"printf '%s\\n' {shlex.quote(line)} >&2\n" for line in stderr_lines)
    script.write_text(f"#!/bin/sh\n{body}exit {code}\n")
    script.chmod(0o755)
    return script


async def failure_of(cli: Path, **options: object) -> str:
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            # The kwargs are ClaudeAgentOptions fields.
            options=ClaudeAgentOptions(cli_path=str(cli), **options)  # pyright: ignore[reportArgumentType]
        )
    )
    with pytest.raises(SessionError) as caught:
        await SessionDriver(runner).turn("hello")
    assert caught.value.retryable, "a crashed CLI may do better on another attempt"
    return str(caught.value)


async def test_a_dying_cli_carries_its_last_stderr_lines_redacted(
    tmp_path: Path,
) -> None:
    noise = [f"noise line {i}" for i in range(1, 31)]
    lines = [*noise, *CREDENTIAL_LINES, "fatal: the model is not available"]
    message = await failure_of(dying_cli(tmp_path, lines, code=7))
    assert "Check stderr output for details" not in message
    # The SDK notices the exit reading stdout (its exit code) or writing stdin (a
    # terminated process, a broken pipe): which one first is a race.
    assert message.startswith("the Claude Code CLI failed: "), message[:200]
    assert "the last lines of its stderr (credentials redacted)" in message
    assert message.endswith("fatal: the model is not available")
    # The last TAIL_LINES lines, and a note of how many came before.
    assert f"[{len(lines) - TAIL_LINES} earlier line(s) not shown]" in message
    first = len(lines) - TAIL_LINES + 1  # the first line shown, counted from 1
    assert f"\nnoise line {first}\n" in message
    assert f"\nnoise line {first - 1}\n" not in message
    for secret in SECRETS:
        assert secret not in message, secret
    assert "ANTHROPIC_API_KEY=***" in message
    assert "Authorization: ***" in message
    assert '"x-api-key": "***"' in message
    assert "CLAUDE_CODE_OAUTH_TOKEN: ***" in message
    assert "https://user:***@proxy.example" in message
    assert "sk-***" in message


async def test_the_tail_is_bounded_in_bytes(tmp_path: Path) -> None:
    lines = [f"{i:02d} " + "é" * 300 for i in range(15)]
    message = await failure_of(dying_cli(tmp_path, [*lines, "x" * 100_000]))
    tail = message.split("(credentials redacted):\n", 1)[1]
    assert len(tail.encode()) <= TAIL_BYTES, len(tail.encode())
    assert tail.startswith("[15 earlier line(s) not shown]\n... xxx"), tail[:80]
    assert tail.endswith("x" * 100), "a long last line is kept by its end"
    assert len(message.encode()) < TAIL_BYTES + 200


async def test_a_cli_that_says_nothing_says_so(tmp_path: Path) -> None:
    message = await failure_of(dying_cli(tmp_path, [], code=3))
    assert message.startswith("the Claude Code CLI failed: "), message[:200]
    assert message.endswith("; it wrote nothing to stderr"), message[:200]


async def test_the_applications_stderr_callback_still_sees_every_line(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    lines = [f"line {i}" for i in range(25)] + [CREDENTIAL_LINES[0]]
    message = await failure_of(dying_cli(tmp_path, lines), stderr=seen.append)
    assert seen == lines, "the application's own callback gets them whole"
    assert SECRETS[0] not in message


def test_redaction_keeps_the_words_around_a_credential() -> None:
    assert redacted("x-api-key: sk-ant-abc123, retrying") == "x-api-key: ***, retrying"
    assert redacted("Authorization: Basic dXNlcjpwYXNz") == "Authorization: ***"
    assert (
        redacted("got 401 for key sk-ant-api03-Zz_9-x") == "got 401 for key sk-ant-***"
    )
    assert redacted("ANTHROPIC_AUTH_TOKEN='tok-123'") == "ANTHROPIC_AUTH_TOKEN='***'"
    plain = "Error: connect ECONNREFUSED 127.0.0.1:443 (attempt 3 of 10)"
    assert redacted(plain) == plain


def test_a_tail_keeps_the_last_lines_only() -> None:
    tail = StderrTail(lambda _line: None)
    assert tail.text() == ""
    for i in range(100):
        tail(f"line {i}")
    lines = tail.text().splitlines()
    assert lines[0] == f"[{100 - TAIL_LINES} earlier line(s) not shown]"
    assert lines[1:] == [f"line {i}" for i in range(100 - TAIL_LINES, 100)]


def test_a_key_cut_with_its_long_line_is_redacted_first() -> None:
    tail = StderrTail(lambda _line: None)
    key = "sk-ant-api03-" + "K" * 40
    # The key straddles where a very long line is cut.
    tail(f"{key} " + "b" * (65536 - 20))
    text = tail.text()
    assert "KKKKKKKKKK" not in text
    assert len(text.encode()) <= TAIL_BYTES


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(
    lines=st.lists(st.text(max_size=400), max_size=40),
    at=st.integers(min_value=0, max_value=39),
    credential=st.sampled_from(CREDENTIAL_LINES),
)
def test_any_tail_is_bounded_and_hides_credentials(
    lines: list[str], at: int, credential: str
) -> None:
    tail = StderrTail(lambda _line: None)
    lines.insert(min(at, len(lines)), credential)
    for line in lines:
        tail(line)
    text = tail.text()
    assert len(text.encode(errors="surrogatepass")) <= TAIL_BYTES
    for secret in SECRETS:
        assert secret not in text

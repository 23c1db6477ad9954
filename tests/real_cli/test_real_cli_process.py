"""What happens to the real CLI when a segment fails, is cancelled, or loses its worker."""

import asyncio
import http.server
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dex_agents._errors import SessionError
from dex_agents.claude import _process, _segment
from dex_agents.session import ToolCall
from dex_agents.session._records import ToolRecord
from support import TESTS_DIR
from support.claude_harness import (
    Approval,
    Hermetic,
    Ledger,
    SessionDriver,
    runner_for,
)
from support.processes import cli_processes_in

LAUNCHERS = ["util-linux", "python"]
"""How the CLI is started: `sh` + `setsid` + `setpriv`, or the Python launcher (fallback)."""


@pytest.fixture(params=LAUNCHERS)
def launcher(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    if request.param == "python":
        monkeypatch.setattr(_process, "_util_linux_tools", lambda: None)
    elif _process._util_linux_tools() is None:  # pyright: ignore[reportPrivateUsage]
        pytest.skip("util-linux setsid/setpriv --pdeathsig are not installed")
    scripts: list[str] = []
    write = _process._launch_script  # pyright: ignore[reportPrivateUsage]

    def spy(real_cli: str, pid_file: Path) -> str:
        scripts.append(write(real_cli, pid_file))
        return scripts[-1]

    monkeypatch.setattr(_process, "_launch_script", spy)
    yield str(request.param)
    # In-process segments ran the launcher this parameter names.
    word = "setpriv" if request.param == "util-linux" else "_launcher.py"
    assert all(word in script for script in scripts), scripts


async def wait_until_gone(cwd: Path, timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := cli_processes_in(cwd)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


pytestmark = pytest.mark.skipif(
    not Path("/proc/self/cwd").exists(), reason="needs Linux /proc"
)


async def test_an_error_result_fails_the_attempt(hermetic: Hermetic) -> None:
    """`error_max_turns` fails the attempt for good: another would stop the same way."""
    driver = SessionDriver(runner_for(hermetic, Ledger(), max_turns=1))
    with pytest.raises(SessionError, match=r"reached `max_turns` \(1\)") as raised:
        await driver.turn('dex-script: call lookup_order {"orderId": "7"}')
    assert not raised.value.retryable


_SDK_CRASH_LOG = "Fatal error in message reader"


def _sdk_crash_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.getMessage().startswith(_SDK_CRASH_LOG)
    ]


async def test_a_cancelled_attempt_kills_the_cli(
    hermetic: Hermetic, launcher: str, caplog: pytest.LogCaptureFixture
) -> None:
    cwd = hermetic.base / "cwd"
    driver = SessionDriver(runner_for(hermetic, Ledger()))
    task = asyncio.create_task(driver.turn("dex-script: say hi ;; pause g1"))
    try:
        await hermetic.api.wait_paused("g1")
        assert cli_processes_in(cwd), "the CLI should be running in the segment's cwd"
        _assert_launched_by(cwd, launcher)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 3
        assert await wait_until_gone(cwd) == []
        # Killed on purpose: the SDK's "Fatal error" is not logged as a crash.
        assert _sdk_crash_logs(caplog) == []
    finally:
        hermetic.api.open_gate("g1")


async def test_a_cli_killed_by_someone_else_fails_the_attempt_and_is_logged(
    hermetic: Hermetic, caplog: pytest.LogCaptureFixture
) -> None:
    cwd = hermetic.base / "cwd"
    driver = SessionDriver(runner_for(hermetic, Ledger()))
    task = asyncio.create_task(driver.turn("dex-script: say hi ;; pause g2"))
    try:
        await hermetic.api.wait_paused("g2")
        (pid,) = cli_processes_in(cwd)
        os.kill(pid, signal.SIGKILL)  # not the segment's doing: out of memory, say
        with pytest.raises(SessionError, match="the Claude Code CLI failed"):
            await task
    finally:
        hermetic.api.open_gate("g2")
    (logged,) = _sdk_crash_logs(caplog)
    assert "exit code -9" in logged


async def test_a_cli_that_ended_its_turn_exits_after_the_delay_one_that_deferred_at_once(
    hermetic: Hermetic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exit of a CLI that ended its turn waits `_EXIT_DELAY`; a deferral's does not."""
    monkeypatch.setattr(_segment, "_EXIT_DELAY", 8.0)
    cwd = hermetic.base / "cwd"
    driver = SessionDriver(runner_for(hermetic, Ledger()))
    at_decision: list[list[int]] = []
    settle = driver.settle

    async def settle_once_exited(
        turn_id: str, step: int, call: ToolCall, decide: Callable[[ToolCall], Approval]
    ) -> ToolRecord:
        # The deferring segment returned; its CLI exits well before the delay.
        at_decision.append(await wait_until_gone(cwd, timeout=4))
        return await settle(turn_id, step, call, decide)

    monkeypatch.setattr(driver, "settle", settle_once_exited)
    result = await driver.turn('dex-script: call create_refund {"orderId": "7"}')
    assert at_decision == [[]]
    assert result.completed.final_text
    # The resumed segment returned at its result; its CLI waits out the delay.
    assert cli_processes_in(cwd), "the CLI that ended the turn should still run"
    assert await wait_until_gone(cwd, timeout=20) == []


WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from claude_agent_sdk import ClaudeAgentOptions
    from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner, _process
    if sys.argv[4] == "python":
        _process._util_linux_tools = lambda: None
    sys.path.insert(0, sys.argv[1])
    from support.claude_harness import Hermetic, Ledger, SessionDriver, runner_for

    env = json.loads(sys.argv[2])
    options = ClaudeAgentOptions(tools=[], setting_sources=[], cwd=sys.argv[3], env=env)
    runner = ClaudeAgentRunner(ClaudeAgentDefinition(options=options))
    asyncio.run(SessionDriver(runner).turn("dex-script: say hi ;; pause g2"))
    """
)


async def test_the_cli_dies_with_a_sigkilled_worker(
    hermetic: Hermetic, launcher: str
) -> None:
    import json

    cwd = hermetic.base / "cwd"
    cwd.mkdir(exist_ok=True)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WORKER,
            str(TESTS_DIR),
            json.dumps(hermetic.env),
            str(cwd),
            launcher,
        ],
        env={**os.environ, **hermetic.env},
    )
    try:
        await hermetic.api.wait_paused("g2", timeout=60)
        assert cli_processes_in(cwd)
        _assert_launched_by(cwd, launcher)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        assert await wait_until_gone(cwd) == []
    finally:
        if worker.poll() is None:
            worker.kill()
        hermetic.api.open_gate("g2")


def _assert_launched_by(cwd: Path, launcher: str) -> None:
    """The CLI leads its own process group (both launchers call setsid)."""
    del launcher
    (pid,) = cli_processes_in(cwd)
    assert os.getpgid(pid) == pid


async def test_a_cli_with_no_credentials_fails_for_good_and_says_how_to_sign_in(
    hermetic: Hermetic,
) -> None:
    # No ANTHROPIC_API_KEY (and no login in the temporary HOME): the CLI answers
    # "Not logged in · Please run /login", which no retry can change.
    env = {k: v for k, v in hermetic.env.items() if k != "ANTHROPIC_API_KEY"}
    driver = SessionDriver(runner_for(hermetic, env=env))
    with pytest.raises(SessionError) as raised:
        await driver.turn("dex-script: say hi")
    assert not raised.value.retryable
    message = str(raised.value)
    assert "not signed in" in message, message
    assert "ANTHROPIC_API_KEY" in message and "dex-agents doctor" in message, message
    assert hermetic.proxy.attempts == []


class _RefusesEveryKey(http.server.BaseHTTPRequestHandler):
    """A Messages API that answers every request as the real one does a bad key."""

    requests = 0

    def do_POST(self) -> None:  # the name http.server calls
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "authentication_error",
                    "message": "invalid x-api-key",
                },
            }
        ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.mark.parametrize(
    "retries",
    [
        # As a user runs it: the CLI would retry the 401 with backoff for minutes
        # (10 tries); its first retry notice ends the segment.
        None,
        # With no retries the CLI ends with an error result that says so.
        "0",
    ],
)
async def test_a_refused_api_key_fails_for_good_and_says_how_to_sign_in(
    hermetic: Hermetic, retries: str | None
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RefusesEveryKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cwd = hermetic.base / "cwd"
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        env = {**hermetic.env, "ANTHROPIC_BASE_URL": url}
        env.pop("CLAUDE_CODE_MAX_RETRIES", None)
        if retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = retries
        driver = SessionDriver(runner_for(hermetic, env=env))
        started = time.monotonic()
        with pytest.raises(SessionError) as raised:
            await driver.turn("dex-script: say hi")
        # Long before the CLI's second retry (its backoff starts at 0.5 s, then 1 s).
        assert time.monotonic() - started < 30
        assert _RefusesEveryKey.requests <= 2
        assert await wait_until_gone(cwd) == []
    finally:
        server.shutdown()
        server.server_close()
        _RefusesEveryKey.requests = 0
    assert not raised.value.retryable
    message = str(raised.value)
    assert "not signed in" in message and "ANTHROPIC_API_KEY" in message, message
    if retries is None:
        assert "refused ANTHROPIC_API_KEY: HTTP 401" in message, message

"""Helpers of CLI tests: run commands in-process or in a pseudo-terminal.

Read commands run in-process through click's `CliRunner`, in a thread: each
command runs its own event loop, while the test's loop keeps serving the flow's
worker. `dev`, `worker` and `chat` run as real processes in a pseudo-terminal.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pexpect
import pytest
import pytest_asyncio
from click.testing import CliRunner, Result
from temporalio.client import Client

from dex_agents.cli._app import main
from dex_agents.cli._errors import prog
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config

HERE = Path(__file__).parent
DEX_AGENTS = str(Path(sys.executable).parent / "dex-agents")


def typed_command() -> str:
    """How `dex-agents`'s advice names the command that `spawn` runs."""
    return prog(DEX_AGENTS)


async def invoke(*args: str) -> Result:
    """Run `dex-agents ARGS` in-process, off the test's event loop."""
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, main, list(args))


def assert_one_line_error(result: Result, *fragments: str, exit_code: int = 1) -> None:
    """The command failed with one `error:` line that says the fragments."""
    assert result.exit_code == exit_code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@dataclass
class Served:
    """A ledger flow served by an in-process worker, and the CLI options to reach it."""

    flow_type: str
    sessions: SessionClient
    store: SQLiteRuntimeStore
    ledger: Ledger
    base: Path
    target: list[str] = field(default_factory=lambda: [])
    """`--state-dir` of the run's dev server and this test's `--store`."""

    def session_id(self) -> str:
        return f"session-{uuid.uuid4().hex[:8]}"

    async def run(self, *args: str) -> Result:
        """Run a command against this test's server and store."""
        return await invoke(*args, *self.target)


def agent_env(base: Path, flow_type: str) -> dict[str, str]:
    """The environment of a `dex-agents` process serving `tests/support/agents.py`."""
    ledger_config(base, flow_type)
    return {
        **os.environ,
        "PYTHONPATH": str(HERE),
        "DEX_AGENTS_TEST_DIR": str(base),
        "DEX_AGENTS_TEST_FLOW": flow_type,
    }


def offline_env(state: Path) -> dict[str, str]:
    """No API key (the scripted model answers), no Claude settings, state in `state`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "DEX_AGENTS_EXAMPLE_"))
    }
    env["DEX_AGENTS_STATE_DIR"] = str(state)
    env.pop("COLUMNS", None)  # piped, as in CI: no terminal width to go by
    return env


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class Term:
    """A `dex-agents` process in a pseudo-terminal, matched on its text without styles.

    Rich colors words separately and redraws spinners, so patterns are searched
    in the output with escape sequences and carriage returns removed.
    """

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self._raw = ""
        self._pos = 0

    @property
    def text(self) -> str:
        """Everything printed so far, without escape sequences."""
        return _ANSI.sub("", self._raw)

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Wait for `pattern` (a regex) after the previous match; return the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.text, self._pos)
            if match:
                self._pos = match.end()
                return match
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{pattern!r} not printed; after the last match:\n"
                    f"{self.text[self._pos :][-3000:]}"
                )
            try:
                self._raw += self.child.read_nonblocking(4096, timeout=0.1)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                deadline = 0

    def expect_exact(self, text: str, timeout: float = 30) -> None:
        """Wait for `text` literally."""
        self.expect(re.escape(text), timeout)

    def sendline(self, line: str) -> None:
        self.child.sendline(line)

    def sendcontrol(self, char: str) -> None:
        self.child.sendcontrol(char)

    def sendintr(self) -> None:
        self.child.sendintr()

    def wait_exit(self, timeout: float = 30) -> int:
        """Read to the end and return the exit status (killing a hung process)."""
        if self.child.closed:
            assert self.child.exitstatus is not None
            return self.child.exitstatus
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    self._raw += self.child.read_nonblocking(4096, timeout=0.1)
                except pexpect.TIMEOUT:
                    continue
                except pexpect.EOF:
                    break
        finally:
            if self.child.isalive():
                self.child.kill(9)
            self.child.close()
        assert self.child.exitstatus is not None, (
            f"killed by signal {self.child.signalstatus}; output:\n{self.text[-3000:]}"
        )
        return self.child.exitstatus

    def stop(self) -> int:
        """Ctrl-C the process and return its exit status."""
        if not self.child.closed and self.child.isalive():
            self.child.sendintr()
        return self.wait_exit()


def spawn(args: list[str], env: dict[str, str], cwd: Path) -> Term:
    """`dex-agents ARGS` in a pseudo-terminal wide enough that nothing wraps."""
    child = pexpect.spawn(
        DEX_AGENTS,
        args,
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 250),
    )
    child.logfile_read = (cwd / f"pty-{args[0]}-{uuid.uuid4().hex[:6]}.log").open("w")
    return Term(child)


def spawn_chat(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str, *args: str
) -> Term:
    """`dex-agents chat ARGS` on `engine` and the test's store, with the agent's env."""
    return spawn_command(engine, tmp_path, flow_type, "chat", *args)


def spawn_command(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str, command: str, *args: str
) -> Term:
    """`dex-agents COMMAND ARGS` on `engine` and the test's store, with the agent's env."""
    return spawn(
        [
            command,
            *args,
            "--state-dir",
            str(engine.state_dir),
            "--store",
            str(tmp_path / "runtime.sqlite"),
        ],
        agent_env(tmp_path, flow_type),
        tmp_path,
    )


@pytest.fixture
def no_dex_agents_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer setting may point a command elsewhere (CLI tests use it for every test)."""
    for name in list(os.environ):
        if name.startswith("DEX_AGENTS_"):
            monkeypatch.delenv(name)


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def served(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[Served]:
    """A ledger flow with a worker in this process, on the run's dev server."""
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store_path = tmp_path / "runtime.sqlite"
    store = await SQLiteRuntimeStore.open(store_path)
    async with create_worker(client, [flow], store=store):
        yield Served(
            flow_type=flow_type,
            sessions=SessionClient(client, flow, store),
            store=store,
            ledger=Ledger(config.ledger_path),
            base=tmp_path,
            target=["--state-dir", str(engine.state_dir), "--store", str(store_path)],
        )
    await store.close()


@contextmanager
def ledger_worker(
    engine: EmbeddedEngine, base: Path, flow_type: str, agent: str = "agents:flow"
) -> Iterator[Term]:
    """`dex-agents worker` serving `agent` (a module of `tests/support/`), stopped on exit."""
    child = spawn(
        [
            "worker",
            "--agent",
            agent,
            "--state-dir",
            str(engine.state_dir),
            "--store",
            str(base / "runtime.sqlite"),
        ],
        agent_env(base, flow_type),
        base,
    )
    child.expect("ready")
    yield child
    child.stop()


@pytest.fixture
def cli_worker(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> Iterator[Term]:
    """`dex-agents worker` serving the ledger flow on the run's dev server."""
    with ledger_worker(engine, tmp_path, flow_type) as child:
        yield child

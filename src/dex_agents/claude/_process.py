"""The CLI subprocess of a segment: its own process group, killed with the attempt.

The SDK starts the CLI as a plain child of the worker. A cancelled attempt that
reaches the SDK as a raw asyncio cancellation skips the SDK's terminate-and-kill
escalation, and a SIGKILLed worker kills nothing, so the CLI (and the Bash
commands it started) would outlive the attempt. The adapter therefore starts
the CLI through a small shell script that records its PID, puts it in a new
process group and makes Linux SIGKILL it when the worker dies, and then `exec`s
the CLI with the same PID; when the attempt ends, however it ends,
`CliProcessGroup.kill` SIGKILLs whatever is left of the group.

The group alone is not enough: the CLI (2.1.332) starts each Bash command
detached, as the leader of a session of its own, so a command running when its
CLI was killed (an approved `sleep 600`, a build) went on, reparented to init,
after the turn was cancelled. `kill` therefore stops the CLI's group first (a
stopped process starts nothing), finds the processes the CLI started by their
parent PIDs in `/proc`, SIGKILLs the groups they lead and then the CLI's own.
A command that detaches itself once more (a daemon) is not found, and a
SIGKILLed worker takes only the CLI with it (the death signal is the CLI's).

Where util-linux's `setsid` and `setpriv --pdeathsig` exist (every Linux
distribution ships them), the script is `sh` and two `exec`s: about 4 ms. Else
it runs `_launcher.py` under Python, which does the same with `ctypes` (about
17 ms, measured by `make bench` as most of the adapter's cost per segment).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path

import claude_agent_sdk

from . import _launcher

CLI_PATH_VARIABLE = "DEX_AGENTS_CLAUDE_CLI"
"""Names the CLI a segment runs when its options set no `cli_path`.

It comes before the bundled binary, so a worker (or the real-CLI test suite,
`make cli-compat`) can try another Claude Code release without a code change.
"""


def real_cli_path(cli_path: str | Path | None) -> str:
    """The CLI a segment runs: `cli_path`, `$DEX_AGENTS_CLAUDE_CLI`, the bundled binary, or `claude`."""
    if cli_path is not None:
        return str(cli_path)
    if named := os.environ.get(CLI_PATH_VARIABLE):
        return str(Path(named).absolute())
    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if bundled.is_file():
        return str(bundled)
    found = shutil.which("claude")
    if found is None:
        raise claude_agent_sdk.CLINotFoundError(
            "Claude Code not found: install `claude-agent-sdk` with its bundled CLI, "
            "or set `cli_path` in the Claude agent options"
        )
    return found


class CliProcessGroup:
    """One segment's CLI process group; use as a context manager around the query."""

    def __init__(self, real_cli: str) -> None:
        self._real_cli = real_cli
        self._directory: Path | None = None
        self.killed = False
        """True once `kill` signalled the group: the CLI's end is then taken as
        ours (a CLI that crashed on its own just before is not told apart)."""

    @contextlib.contextmanager
    def bound(self) -> Generator[None]:
        """Within the block, this is the group of the running task and of the tasks it starts.

        The SDK's message reader, started by the query from this task, then
        finds the group when the CLI it reads ends: a CLI this group killed is
        not logged as a "Fatal error" (see `_OwnKillsFilter`). Tasks started in
        the block keep the group after it ends.
        """
        _install_own_kills_filter()
        token = _BOUND.set(self)
        try:
            yield
        finally:
            _BOUND.reset(token)

    def __enter__(self) -> CliProcessGroup:
        self._directory = Path(tempfile.mkdtemp(prefix="dex-agents-cli-"))
        script = self._directory / "claude"
        script.write_text(_launch_script(self._real_cli, self._directory / "pid"))
        script.chmod(0o700)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.kill()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None

    @property
    def cli_path(self) -> str:
        """What the SDK runs instead of the CLI."""
        return str(self._require_directory() / "claude")

    def environment(self) -> dict[str, str]:
        """Variables the launcher reads (and removes before it starts the CLI)."""
        if _util_linux_tools() is not None:
            return {}  # the shell script names both itself
        return {
            _launcher.REAL_CLI_VARIABLE: self._real_cli,
            _launcher.PID_FILE_VARIABLE: str(self._require_directory() / "pid"),
        }

    @property
    def pid(self) -> int | None:
        """The CLI's PID (the group's), once the launcher recorded it."""
        if self._directory is None:
            return None
        try:
            return int((self._directory / "pid").read_text())
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL every process left in the group and those the CLI started.

        Nothing if none started. A CLI that already exited left nothing to
        find (its children were reparented when it exited), so the search of
        `/proc` runs only while its group is alive: on a cancel, not after a
        segment that ended on its own.
        """
        pid = self.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signal.SIGSTOP)
        except ProcessLookupError:
            # Killed before `setsid` made its group: the process alone, if alive.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                self.killed = True
            return
        except PermissionError:
            return
        for leader in _detached_leaders(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(leader, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            self.killed = True

    def _require_directory(self) -> Path:
        if self._directory is None:
            raise RuntimeError("CliProcessGroup is used outside its `with` block")
        return self._directory


def _detached_leaders(root: int) -> list[int]:
    """Descendants of `root` that lead a process group other than `root`'s.

    Read from `/proc/<pid>/stat` (parent PID, group); an empty list where
    there is no `/proc`. Only a group whose leader is a descendant is named,
    so the worker's own group, or anyone else's, is never among them.
    """
    parents: dict[int, list[tuple[int, int]]] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            # `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
            parent, group = int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(parent, []).append((int(entry.name), group))
    leaders: list[int] = []
    pending = [root]
    seen = {root}
    while pending:
        for child, group in parents.get(pending.pop(), []):
            if child in seen:
                continue
            seen.add(child)
            pending.append(child)
            if group == child:
                leaders.append(child)
    return leaders


_BOUND: contextvars.ContextVar[CliProcessGroup | None] = contextvars.ContextVar(
    "dex_agents_cli_group", default=None
)
_SDK_READER_LOGGER = "claude_agent_sdk._internal.query"
_SDK_READER_FAILED = "Fatal error in message reader"


class _OwnKillsFilter(logging.Filter):
    """Drops the SDK's ERROR for a CLI the segment itself killed.

    Stopping a turn, or ending a primed park, SIGKILLs the CLI on purpose; the
    SDK's reader then logs `Fatal error in message reader: Command failed with
    exit code -9` at ERROR, which reads as a crash in a worker's log. A CLI that
    dies any other way (killed by someone else, out of memory, crashed) is
    still logged, and the segment reports it as a failure.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        group = _BOUND.get()
        return not (
            group is not None
            and group.killed
            and str(record.msg).startswith(_SDK_READER_FAILED)
        )


@functools.cache
def _install_own_kills_filter() -> None:
    logging.getLogger(_SDK_READER_LOGGER).addFilter(_OwnKillsFilter())


@functools.cache
def _util_linux_tools() -> tuple[str, str] | None:
    """`setsid` and a `setpriv` that knows `--pdeathsig`, or None (not Linux, or too old)."""
    setsid, setpriv = shutil.which("setsid"), shutil.which("setpriv")
    if setsid is None or setpriv is None:
        return None
    try:
        usage = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return (setsid, setpriv) if "--pdeathsig" in usage else None


def _launch_script(real_cli: str, pid_file: Path) -> str:
    """The `sh` script the SDK runs as its CLI: PID, process group, death signal, `exec`.

    `setsid` does not fork here (the SDK's child is no group leader), so every
    `exec` keeps the PID the script recorded. The death signal is set a few
    milliseconds after the fork: a worker killed inside that window leaves a
    CLI whose stdin is closed, and the CLI exits on its own.
    """
    tools = _util_linux_tools()
    q = shlex.quote
    if tools is None:
        launcher = Path(_launcher.__file__)
        return f'#!/bin/sh\nexec {q(sys.executable)} -I -S {q(str(launcher))} "$@"\n'
    setsid, setpriv = tools
    return (
        "#!/bin/sh\n"
        f"echo $$ > {q(str(pid_file))}\n"
        f'exec {q(setsid)} {q(setpriv)} --pdeathsig KILL -- {q(real_cli)} "$@"\n'
    )

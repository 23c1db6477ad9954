"""The CLI subprocess of a segment: its own process group, killed with the attempt.

The SDK starts the CLI as a plain child of the worker. A cancelled attempt that
reaches the SDK as a raw asyncio cancellation skips the SDK's terminate-and-kill
escalation, and a SIGKILLed worker kills nothing, so the CLI (and the Bash
commands it started) would outlive the attempt. The adapter therefore starts
the CLI through `_launcher.py`, which puts it in a new process group, makes
Linux SIGKILL it when the worker dies, and records its PID; when the attempt
ends, however it ends, `CliProcessGroup.kill` SIGKILLs whatever is left of the
group.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import claude_agent_sdk

from . import _launcher


def real_cli_path(cli_path: str | Path | None) -> str:
    """The CLI the SDK would run: `cli_path`, the bundled binary, or `claude`."""
    if cli_path is not None:
        return str(cli_path)
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

    def __enter__(self) -> CliProcessGroup:
        self._directory = Path(tempfile.mkdtemp(prefix="dex-agents-cli-"))
        script = self._directory / "claude"
        launcher = Path(_launcher.__file__)
        script.write_text(
            "#!/bin/sh\n"
            f"exec {shlex.quote(sys.executable)} -I -S {shlex.quote(str(launcher))} "
            '"$@"\n'
        )
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
        return {
            _launcher.REAL_CLI_VARIABLE: self._real_cli,
            _launcher.PID_FILE_VARIABLE: str(self._require_directory() / "pid"),
        }

    def kill(self) -> None:
        """SIGKILL every process left in the group; nothing if none started."""
        if self._directory is None:
            return
        try:
            pid = int((self._directory / "pid").read_text())
        except (OSError, ValueError):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def _require_directory(self) -> Path:
        if self._directory is None:
            raise RuntimeError("CliProcessGroup is used outside its `with` block")
        return self._directory

"""Starts the Claude Code CLI in its own process group, tied to its parent's life.

This file runs as a script (`python -I -S _launcher.py`), never as a module of
the package, so it starts in milliseconds: it must import nothing beyond the
standard library. It makes the process a session (and so a process group)
leader, asks Linux to SIGKILL it when the worker process dies, writes its PID
where the runner can find it, and then `exec`s the real CLI with the same PID.
"""

import contextlib
import os
import sys

REAL_CLI_VARIABLE = "DEX_AGENTS_REAL_CLAUDE_CLI"
PID_FILE_VARIABLE = "DEX_AGENTS_CLAUDE_PID_FILE"
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def _die_with_parent() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        # Not Linux: the runner still kills the group when its attempt ends.
        return
    if os.getppid() == 1:
        # The parent died before prctl took effect.
        os._exit(1)


def main() -> None:
    real_cli = os.environ.pop(REAL_CLI_VARIABLE)
    pid_file = os.environ.pop(PID_FILE_VARIABLE, None)
    with contextlib.suppress(OSError):
        # An error means it already leads a session, so its group is its own.
        os.setsid()
    _die_with_parent()
    if pid_file:
        with open(pid_file, "w") as f:  # noqa: PTH123 - no pathlib import here
            f.write(str(os.getpid()))
    os.execv(real_cli, [real_cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()

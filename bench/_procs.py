"""Processes and memory, read from Linux /proc.

The bench asks two questions of the process table: how much memory a worker
holds, and whether a session owns a process (a Claude Code CLI, or anything
else) while it waits. Only this process's own descendants count, since the
machine may run other programs with the same binaries.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import defaultdict
from pathlib import Path

from dex_agents.testing._hermetic import bundled_cli_path


def rss_mb(pid: int) -> float:
    """Resident set size of `pid` in MB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def thread_count(pid: int) -> int:
    """Threads of `pid`, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name may hold spaces and parentheses: split after the last ")".
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            children[ppid].append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def count_cli_processes() -> int:
    """Claude Code CLIs alive below this process (a segment's, or a leaked one)."""
    cli = bundled_cli_path()
    if cli is None:
        return 0
    target = cli.resolve()
    count = 0
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/exe").resolve(strict=True) == target:
                count += 1
    return count


async def settled_cli_count(at_most: int, timeout: float) -> int:
    """The CLIs alive below this process once at most `at_most` are, or at `timeout`.

    A segment returns at its CLI's result and the CLI exits just after
    (`_EXIT_DELAY` in `dex_agents.claude._segment`): counted at once, an exiting
    CLI would count as held.
    """
    deadline = time.monotonic() + timeout
    while (count := count_cli_processes()) > at_most and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    return count

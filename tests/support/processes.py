"""Finding a session's CLI among live processes, by the working directory it runs in."""

from __future__ import annotations

from pathlib import Path


def cli_processes_in(cwd: Path) -> list[int]:
    """PIDs of live processes whose working directory is `cwd` (a session's CLI)."""
    resolved = cwd.resolve()
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cwd").readlink() == resolved:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids

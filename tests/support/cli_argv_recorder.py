"""A `cli_path` wrapper that records every CLI run's argv, then runs the fake CLI.

Tests that prove a flag reaches the CLI (on a first and a resumed segment) read
the log back; one wrapper serves them all.
"""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path

from support.fake_cli import fake_claude_cli_path

_RECORD = (
    "import json, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')"
)


def recording_cli(base: Path, name: str = "recording-claude") -> tuple[Path, Path]:
    """Write the wrapper into `base`; return it and the log it appends to (one JSON list per run)."""
    log = base / f"{name}.argv.jsonl"
    script = base / name
    script.write_text(
        "#!/bin/sh\n"
        f"{shlex.quote(sys.executable)} -I -c {shlex.quote(_RECORD)} "
        f'{shlex.quote(str(log))} "$@"\n'
        f'exec {shlex.quote(str(fake_claude_cli_path()))} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def recorded_runs(log: Path) -> list[list[str]]:
    """The argv of every run so far, in order (none when the CLI never ran)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of `--flag value` or `--flag=value`, else None."""
    values = flag_values(argv, flag)
    return values[0] if values else None


def flag_values(argv: list[str], flag: str) -> list[str]:
    """Every value of `--flag value` or `--flag=value` on `argv`."""
    values: list[str] = []
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            values.append(argv[index + 1])
        elif token.startswith(f"{flag}="):
            values.append(token.removeprefix(f"{flag}="))
    return values

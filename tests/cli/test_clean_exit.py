"""Commands end cleanly as real processes: the message, the exit code, and nothing after.

temporalio's Rust runtime used to be dropped while the interpreter finalized,
which aborted 5 of 6 runs of `approve` for an unknown session after its message
(`Fatal Python error: PyGILState_Release`, exit 134 or 139). The crash is a
race at exit, so each command runs 20 times, as the installed script.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine
from support.cli_harness import DEX_AGENTS

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

RUNS = 20
BATCH = 8
"""Processes at a time: enough to finish in reasonable time on 2 cores."""


async def _run(args: list[str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        DEX_AGENTS,
        *args,
        cwd=cwd,
        env={**os.environ, "PYTHONFAULTHANDLER": ""},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, stderr.decode()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("command", ["approve", "reject", "show", "events"])
async def test_unknown_session_exits_1_with_its_message_every_time(
    engine: EmbeddedEngine, tmp_path: Path, command: str
) -> None:
    store = tmp_path / "runtime.sqlite"
    await (await SQLiteRuntimeStore.open(store)).close()  # `events` then asks Temporal
    sid = f"never-started-{uuid.uuid4().hex[:8]}"
    args = [command, sid, *(["intr_x"] if command in ("approve", "reject") else [])]
    args += ["--state-dir", str(engine.state_dir), "--store", str(store)]
    outcomes: list[tuple[int, str]] = []
    for start in range(0, RUNS, BATCH):
        batch = range(start, min(start + BATCH, RUNS))
        outcomes += await asyncio.gather(*(_run(args, tmp_path) for _ in batch))
    assert len(outcomes) == RUNS
    for code, stderr in outcomes:
        assert "Fatal Python error" not in stderr, stderr
        assert code == 1, f"exit {code} (a negative one is a signal):\n{stderr}"
        (line,) = stderr.strip().splitlines()
        assert line.startswith(f"error: unknown session {sid!r} on "), line

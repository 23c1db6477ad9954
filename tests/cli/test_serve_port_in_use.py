"""`serve` and `dev` on a port another process listens on: one line, exit 1.

uvicorn reports a failed bind by logging it and raising `SystemExit(3)` out of
the event loop, which printed ~50 lines (`Task exception was never retrieved`)
and exited 3, the code of "an approval recorded, not applied yet". The commands
now check the port first and say which option picks another.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.temporal import EmbeddedEngine
from support.cli_harness import DEX_AGENTS

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that a real socket of this test listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DEX_AGENTS, *args],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_port_error(
    done: subprocess.CompletedProcess[str], port: int, option: str
) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Traceback" not in out and "Task exception" not in out, out
    assert "was destroyed but it is pending" not in out, out
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot serve on 127.0.0.1:{port}: "), line
    assert "in use by another process" in line, line
    assert f"pass another `{option} N`" in line, line


@pytest.mark.timeout(120)
async def test_serve_on_a_port_in_use_says_so_in_one_line_and_exits_1(
    engine: EmbeddedEngine, tmp_path: Path, taken_port: int
) -> None:
    args = ["serve", "--allow-anonymous-loopback", "--port", str(taken_port)]
    args += ["--state-dir", str(engine.state_dir)]
    args += ["--store", str(tmp_path / "runtime.sqlite")]
    done = await asyncio.to_thread(_run, args, tmp_path)
    _assert_port_error(done, taken_port, "--port")


@pytest.mark.timeout(120)
def test_dev_on_a_web_port_in_use_says_so_in_one_line_and_exits_1(
    tmp_path: Path, taken_port: int
) -> None:
    state = tmp_path / "state"
    args = ["dev", "--no-ui", "--web-port", str(taken_port), "--state-dir", str(state)]
    done = _run(args, tmp_path)
    _assert_port_error(done, taken_port, "--web-port")
    # The dev server it started for the run is stopped again.
    assert not (state / "engine.json").exists()

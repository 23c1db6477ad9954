"""The wheel works outside the repository: `--help`, and `dex-agents demo` offline.

`--help` says where to start and `demo` runs the example agent, so the wheel
must ship that agent (`dex_agents.examples.support_agent`) and neither may need
a checkout. Both run from an empty temporary directory with the wheel's own
`dex-agents` (see `wheel_venv`), the real bundled Claude Code CLI and the
scripted Messages API; a proxy that refuses and records stands in for the
internet.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from dex_agents.testing._hermetic import bundled_cli_path
from dex_agents.testing._refusing_proxy import RefusingProxy
from support.wheel_venv import ROOT, WheelVenv, scrubbed_env


def user_env(wheel: WheelVenv, home: Path, proxy: RefusingProxy) -> dict[str, str]:
    """A user's shell with the wheel's venv on PATH: no key, no project settings."""
    env = scrubbed_env(home, proxy)
    env["PATH"] = f"{wheel.bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_wheel_ships_the_example_agent(wheel: WheelVenv) -> None:
    names = set(zipfile.ZipFile(wheel.wheel).namelist())
    assert "dex_agents/examples/__init__.py" in names
    assert "dex_agents/examples/support_agent.py" in names
    assert not any("__pycache__" in name for name in names)


def test_the_wheel_ships_no_fake_cli(wheel: WheelVenv) -> None:
    # The fake Claude Code CLI is the tests' (`tests/support/fake_cli`), not the kit's.
    names = zipfile.ZipFile(wheel.wheel).namelist()
    modules = [Path(name).name for name in names if name.endswith(".py")]
    assert not [m for m in modules if m.startswith(("_fake_cli", "_fake_claude_cli"))]


async def test_help_works_outside_the_repository(
    wheel: WheelVenv, tmp_path: Path, proxy: RefusingProxy
) -> None:
    env = user_env(wheel, tmp_path / "home", proxy)
    where = subprocess.run(
        [str(wheel.python), "-c", "import dex_agents; print(dex_agents.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(wheel.venv), where.stdout
    done = subprocess.run(
        ["dex-agents", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "dex-agents demo" in done.stdout
    assert "dex-agents dev --agent dex_agents.examples.support_agent:flow" in (
        done.stdout
    )
    assert "examples/support_agent.py" not in done.stdout
    # What --help names is importable from here.
    check = subprocess.run(
        [
            str(wheel.python),
            "-c",
            "from dex_agents.cli._agent_ref import load_flow; "
            "print(load_flow('dex_agents.examples.support_agent:flow').flow_type)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == "SupportAgent"


@pytest.mark.timeout(300)
async def test_demo_runs_offline_outside_the_repository(
    wheel: WheelVenv, tmp_path: Path, proxy: RefusingProxy
) -> None:
    if bundled_cli_path() is None:
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail("the bundled Claude Code CLI is missing")
        pytest.skip("the bundled Claude Code CLI is missing")
    anywhere = tmp_path / "anywhere"
    anywhere.mkdir()
    assert not anywhere.is_relative_to(ROOT)
    env = user_env(wheel, tmp_path / "home", proxy)
    done = subprocess.run(
        ["dex-agents", "demo"],
        cwd=anywhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert out.splitlines()[0].startswith(
        "No ANTHROPIC_API_KEY: using the project's scripted"
    )
    assert "worker: pid " in out
    assert "agent dex_agents.examples.support_agent:flow" in out
    assert "approval needed: create_refund (non_idempotent_write)" in out
    assert "killed (SIGKILL) while the refund waits" in out
    assert "refunds in the ledger: 0" in out
    assert "refunds in the ledger: 1 " in out
    assert "✓ the refund ran exactly once, across a worker crash" in out
    assert "<system-reminder>" not in out
    assert "Traceback" not in out
    # The demo's state is in the directory it ran from.
    assert (anywhere / ".dex-agents" / "runtime.sqlite").is_file()

    # Nothing a person reads of the session quotes the CLI's system reminders.
    match = re.search(r"dex-agents show (demo-\S+)", out)
    assert match, out
    for command in (["show", match.group(1)], ["events", match.group(1)]):
        shown = subprocess.run(
            ["dex-agents", *command],
            cwd=anywhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        assert "order 7: a blue kettle" in shown.stdout
        assert "<system-reminder>" not in shown.stdout

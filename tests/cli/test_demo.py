"""`dex-agents demo` completes offline and exits 0 (what `make demo` runs)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dex_agents.cli._demo import EXAMPLE_FLOW
from support.cli_harness import spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


ROOT = Path(__file__).parents[2]


def _offline_env(state: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "DEX_AGENTS_EXAMPLE_"))
    }
    env["DEX_AGENTS_STATE_DIR"] = str(state)
    env.pop("COLUMNS", None)  # piped, as in CI: no terminal width to go by
    return env


def _demo(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dex_agents.cli", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


@pytest.mark.timeout(300)
def test_demo_runs_offline_and_shows_one_refund(tmp_path: Path) -> None:
    out = _demo(_offline_env(tmp_path / "state"))
    assert out.splitlines()[0].startswith(
        "No ANTHROPIC_API_KEY: using the project's scripted"
    )
    assert "approval needed: create_refund (non_idempotent_write)" in out
    assert "killed (SIGKILL) while the refund waits" in out
    assert "refunds in the ledger: 0" in out
    # The ledger's row on one line, though longer than 80 columns.
    assert re.search(
        r"^refunds in the ledger: 1 \[\('7', 'demo-[^']+'\)\]$", out, re.M
    ), out
    assert "the refund ran exactly once" in out


@pytest.mark.timeout(300)
def test_demo_runs_beside_a_dev_serving_the_same_agent(tmp_path: Path) -> None:
    # The README's Quickstart leaves `dex-agents dev` serving the example agent in
    # another terminal; a demo run on the same state directory (the same server)
    # must keep its turns, and its refund, to its own worker.
    state = tmp_path / "state"
    dev = spawn(
        ["dev", "--agent", EXAMPLE_FLOW, "--state-dir", str(state)],
        _offline_env(state),
        tmp_path,
    )
    try:
        dev.expect("ready", timeout=60)
        out = _demo(_offline_env(state))
        assert "the refund ran exactly once" in out
    finally:
        assert dev.stop() == 0, dev.text
    # The dev worker's own ledger (the example's default, under its directory) saw none.
    ledger = tmp_path / ".dex-agents" / "support.sqlite"
    if ledger.exists():
        with sqlite3.connect(ledger) as conn:
            assert list(conn.execute("SELECT * FROM refunds")) == []

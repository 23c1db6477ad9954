"""`dex-agents demo` completes offline and exits 0 (what `make demo` runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


ROOT = Path(__file__).parents[2]


@pytest.mark.timeout(300)
def test_demo_runs_offline_and_shows_one_refund(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_"))
    }
    env["DEX_AGENTS_STATE_DIR"] = str(tmp_path / "state")
    env["COLUMNS"] = "200"
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
    assert out.splitlines()[0].startswith(
        "No ANTHROPIC_API_KEY: using the project's scripted"
    )
    assert "approval needed: create_refund (non_idempotent_write)" in out
    assert "killed (SIGKILL) while the refund waits" in out
    assert "refunds in the ledger: 0" in out
    assert "refunds in the ledger: 1" in out
    assert "the refund ran exactly once" in out

"""The README's "Your own Client and Worker" block, run exactly as written.

The block is cut from README.md and run as a script by a fresh interpreter,
against the test's dev server (`TEMPORAL_ADDRESS`), the real bundled CLI and
the scripted Messages API; the refund it approves must run exactly once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from claude_rig import EXAMPLES, ClaudeRig
from temporalio.client import Client

README = Path(__file__).parents[2] / "README.md"


def _block(heading: str) -> str:
    text = README.read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"no python block under {heading!r}"
    return match.group(1)


def test_the_readme_plugin_block_runs_as_written(
    claude_rig: ClaudeRig, client: Client, tmp_path: Path
) -> None:
    script = tmp_path / "own_worker.py"
    script.write_text(_block("### Your own Client and Worker"))
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "PYTHONPATH": str(EXAMPLES),
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "approving create_refund {'orderId': '7'}"
    assert "refunded order 7" in lines[-1]
    refunds = claude_rig.example.refunds()
    assert [order for order, _ in refunds] == ["7"]
    assert refunds[0][1].startswith("session-7/turn-1/")
    assert (tmp_path / ".dex-agents" / "runtime.sqlite").exists()

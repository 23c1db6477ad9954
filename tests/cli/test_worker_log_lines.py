"""A serving command prints the library's log lines: each park, as README promises.

The parking logger says at INFO what each park does, but `dex-agents dev` and
`worker` configured no handler, so Python printed none of it (and warnings
bare). While they serve, the `dex_agents` loggers now print there.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from support.cli_harness import offline_env, spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

AGENT = "dex_agents.examples.support_agent:flow"


def test_dev_prints_each_park_of_a_deferred_call(tmp_path: Path) -> None:
    env = offline_env(tmp_path / "state")
    env["DEX_AGENTS_EXAMPLE_WORKDIR"] = str(tmp_path / "agents")
    env["DEX_AGENTS_EXAMPLE_DB"] = str(tmp_path / "support.sqlite")
    dev = spawn(["dev", "--agent", AGENT, "--no-web", "--no-ui"], env, tmp_path)
    dev.expect("ready", timeout=90)
    sid = f"parks-{uuid.uuid4().hex[:6]}"
    chat = spawn(["chat", sid, "--agent", AGENT], env, tmp_path)
    try:
        chat.expect("you › ", timeout=60)
        chat.sendline('Refund order 7. dex-script: call create_refund {"orderId": "7"}')
        chat.expect(re.escape("approve or reject? [a/r]"), timeout=90)
        dev.expect(
            rf"\d\d:\d\d:\d\d parked the resumed segment of session {sid} \(CLI pid \d+\)",
            timeout=60,
        )
        chat.sendline("a")
        chat.expect("you › ", timeout=90)
        dev.expect(rf"answered the parked segment of session {sid}", timeout=60)
        chat.sendcontrol("d")
        assert chat.wait_exit() == 0
    finally:
        assert dev.stop() == 0, dev.text[-3000:]
    assert "Traceback" not in dev.text, dev.text

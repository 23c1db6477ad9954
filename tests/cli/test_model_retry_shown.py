"""A model API that cannot be reached is said in the chat as it happens, not as a slow turn.

`dex-agents dev` with an API key whose API does not answer (the real bundled
CLI, its `ANTHROPIC_BASE_URL` on a port where nothing listens): Claude Code
retries for minutes before the segment fails, and the chat says each retry
and why instead of a bare `working 40s…`.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from support.cli_harness import closed_port, spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

AGENT = "dex_agents.examples.support_agent:flow"


def test_chat_says_the_model_api_cannot_be_reached_while_the_cli_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("DEX_AGENTS_EXAMPLE_WORKDIR", str(tmp_path / "agents"))
    monkeypatch.setenv("DEX_AGENTS_EXAMPLE_DB", str(tmp_path / "support.sqlite"))
    env = dict(os.environ)
    state = tmp_path / "state"
    dev = spawn(["dev", "--agent", AGENT, "--state-dir", str(state)], env, tmp_path)
    dev.expect("ready", timeout=60)
    sid = f"unreachable-{uuid.uuid4().hex[:6]}"
    chat = spawn(
        ["chat", sid, "--agent", AGENT, "--state-dir", str(state)], env, tmp_path
    )
    chat.expect("you › ")
    chat.sendline("hello")
    chat.expect(
        r"↻ the model API could not be reached; asking again in \d+\.\d s "
        r"\(retry 1 of \d+\)",
        timeout=90,
    )
    chat.sendintr()  # stops the turn
    chat.expect("you › ", timeout=60)
    chat.sendcontrol("d")
    assert chat.wait_exit() == 0
    assert "Traceback" not in chat.text, chat.text
    assert dev.stop() == 0

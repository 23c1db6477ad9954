"""A `worker` beside an offline `dev` answers with the scripted model `dev` serves.

`dev --agent` with no ANTHROPIC_API_KEY answers through the scripted Messages
API. A `worker` started on the same state directory, also with no key, used
to run the real CLI without credentials, so every turn it took failed "not
signed in" (about half the sessions of a flow both served). It now uses the
scripted model of that `dev`, and says so in its banner instead of a warning.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from support.cli_harness import DEX_AGENTS, spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

SIDE_AGENT = """
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.examples.support_agent import options

flow = create_claude_agent_session_flow(ClaudeAgentDefinition(options=options), "{name}")
"""


def test_a_worker_without_a_key_beside_an_offline_dev_uses_its_scripted_model(
    tmp_path: Path,
) -> None:
    # A flow only the worker serves: each of its turns is the worker's.
    (tmp_path / "side_agent.py").write_text(
        SIDE_AGENT.format(name=f"Side{uuid.uuid4().hex[:8]}")
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "DEX_AGENTS_EXAMPLE_WORKDIR": str(tmp_path / "agents"),
        "DEX_AGENTS_EXAMPLE_DB": str(tmp_path / "support.sqlite"),
    }
    del env["ANTHROPIC_API_KEY"]  # the tests' dummy key: offline, as a newcomer
    state = tmp_path / "state"
    dev = spawn(
        [
            "dev", "--agent", "dex_agents.examples.support_agent:flow",
            "--state-dir", str(state), "--no-web",
        ],
        env,
        tmp_path,
    )  # fmt: skip
    dev.expect("ready", timeout=60)
    assert (state / "scripted-model.json").exists()
    worker = spawn(
        ["worker", "--agent", "side_agent:flow", "--state-dir", str(state)],
        env,
        tmp_path,
    )
    try:
        worker.expect("ready", timeout=90)
        banner = worker.text.split("ready", 1)[0]
        assert "model     the scripted Messages API at http://127.0.0.1:" in banner
        assert "of the `dev` (pid " in banner, banner
        assert "warning" not in banner, banner

        sid = f"side-{uuid.uuid4().hex[:6]}"
        chat = subprocess.run(
            [DEX_AGENTS, "chat", sid, "--agent", "side_agent:flow",
             "--state-dir", str(state)],
            input="dex-script: say hello from the side\n",
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert chat.returncode == 0, chat.stdout + chat.stderr
        assert "said: hello from the side" in chat.stdout, chat.stdout
        assert "not signed in" not in chat.stdout + chat.stderr
    finally:
        assert worker.stop() == 0
        assert dev.stop() == 0
    # `dev` stopped: the file that named its model is gone.
    assert not (state / "scripted-model.json").exists()

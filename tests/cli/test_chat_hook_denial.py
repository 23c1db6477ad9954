"""A call the agent's own hook denies is said in the chat, with the hook's reason.

Such a call never waits for approval, so no approval line says it: the chat
showed only `⚙ Bash …` and then the model's answer. It now shows
`↳ rejected: <the hook's reason>` as it does every other outcome.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from support.cli_harness import spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

AGENT = """
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow


async def no_rm(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
    if "rm " in hook_input["tool_input"].get("command", ""):
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no rm allowed",
            }
        }
    return {}


flow = create_claude_agent_session_flow(
    ClaudeAgentDefinition(
        options=ClaudeAgentOptions(
            tools=["Bash"],
            setting_sources=[],
            hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[no_rm])]},
        ),
    ),
    "GuardedAgent",
)
"""


def test_the_chat_says_a_call_the_agent_s_hook_denied_and_why(tmp_path: Path) -> None:
    (tmp_path / "guarded.py").write_text(AGENT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("ANTHROPIC_API_KEY", None)  # `dev` serves the scripted Messages API
    state = tmp_path / "state"
    agent = "guarded.py:flow"
    dev = spawn(["dev", "--agent", agent, "--state-dir", str(state)], env, tmp_path)
    dev.expect("ready", timeout=60)
    sid = f"denied-{uuid.uuid4().hex[:6]}"
    chat = spawn(
        ["chat", sid, "--agent", agent, "--state-dir", str(state)], env, tmp_path
    )
    chat.expect("you › ")
    chat.sendline('dex-script: call Bash {"command": "rm -rf build"}')
    chat.expect("⚙ Bash", timeout=90)
    chat.expect("↳ rejected: no rm allowed", timeout=60)
    chat.expect("you › ", timeout=60)
    chat.sendcontrol("d")
    assert chat.wait_exit() == 0
    assert "approve or reject" not in chat.text, chat.text
    assert dev.stop() == 0

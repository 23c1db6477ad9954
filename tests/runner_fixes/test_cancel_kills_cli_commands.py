"""A cancelled turn kills the commands its CLI started, not only the CLI.

On the dev server, a real worker and the bundled CLI against the scripted
Messages API. The CLI (2.1.332) starts each Bash command detached, as the
leader of a session of its own, so killing the CLI's process group left a
running command behind (reparented to init) after `cancel_turn`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import ToolPolicy
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig
from support.processes import cli_processes_in

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc"),
]


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie that no parent reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rpartition(b")")[2].split()[0] != b"Z"


async def test_a_cancel_kills_the_bash_command_its_cli_detached(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=claude_rig.example.options,
            # An approval-free Bash runs inline, inside the segment.
            tool_policies={"Bash": ToolPolicy(effect="read")},
        ),
        "InlineBashAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "cancel-inline-bash"
    cwd = (claude_rig.tmp / "agents" / sid).resolve()
    reached = claude_rig.tmp / "bash.pid"
    # The command writes its shell's PID, then waits in a child of that shell.
    command = f"echo $$ > {shlex.quote(str(reached))}; sleep 60"
    message = f"dex-script: call Bash {json.dumps({'command': command})}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message=message)
        async with asyncio.timeout(60):
            while not reached.exists() or not reached.read_text().strip():
                await asyncio.sleep(0.02)
        shell = int(reached.read_text())
        assert os.getsid(shell) == shell  # detached: not in the CLI's group

        assert await sessions.cancel_turn(sid)

        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "cancelled"
        # Every process in the session's directory is gone: the CLI, the
        # command's shell and its `sleep`.
        async with asyncio.timeout(20):
            while cli_processes_in(cwd):
                await asyncio.sleep(0.05)
        assert not _alive(shell)
    await store.close()

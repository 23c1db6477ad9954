"""The chat when the Temporal server goes away while a turn runs, and its goodbye
for a session that was never started.

Every test runs the real commands (`dev`, `chat`) in a pseudo-terminal; the
server goes away as a user's does: `dev` stopped with Ctrl-C, or its server
killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import uuid
from pathlib import Path

import pytest

from dex_agents.temporal import EmbeddedEngine
from support.cli_harness import Term, agent_env, spawn, spawn_chat

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

RUN = uuid.uuid4().hex[:6]

_NOT_STOPPED = re.escape(
    "the turn was not stopped: the Temporal server does not answer (the turn goes "
    "on once it is back); Ctrl-C again leaves the chat"
)
_LEFT = re.escape(
    "left while the turn runs and the Temporal server is gone; the turn goes on "
    "once the server and a worker are back. Come back with `"
)


def _dev(state: Path, base: Path, flow_type: str) -> Term:
    """`dex-agents dev` serving the ledger flow of `base` on `state`."""
    dev = spawn(
        ["dev", "--agent", "agents:flow", "--state-dir", str(state)],
        agent_env(base, flow_type),
        base,
    )
    dev.expect("ready", timeout=60)
    return dev


def _chat_in_a_paused_turn(state: Path, base: Path, flow_type: str) -> Term:
    """A chat on `state`'s dev server whose turn waits on a gate nobody opens."""
    chat = spawn(
        ["chat", f"lost-{RUN}", "--agent", "agents:flow", "--state-dir", str(state)],
        agent_env(base, flow_type),
        base,
    )
    chat.expect("you › ")
    chat.sendline("say slow ;; pause never")
    chat.expect(r"working \d+s")
    return chat


def _assert_left(chat: Term, session_id: str) -> None:
    chat.expect(_LEFT + r"\S*dex-agents" + re.escape(f" chat {session_id} "))
    assert chat.wait_exit(timeout=15) == 0
    assert chat.text.count("lost the Temporal server") == 1, chat.text
    for flood in ("Traceback", "UNAVAILABLE", "tcp connect error", "WARN"):
        assert flood not in chat.text, chat.text


async def test_a_server_stopped_mid_turn_is_said_and_ctrl_c_twice_leaves(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    dev = _dev(state, tmp_path, flow_type)
    chat = _chat_in_a_paused_turn(state, tmp_path, flow_type)

    assert dev.stop() == 0  # the worker and the server stop
    # The advice comes by itself while the turn waits, within a few seconds
    # (the silent turn's health checks), not at the next silence check.
    chat.expect("lost the Temporal server at 127.0.0.1:\\d+; start it again", 10)
    chat.sendintr()
    chat.expect(_NOT_STOPPED)
    chat.sendintr()
    _assert_left(chat, f"lost-{RUN}")


async def test_ctrl_c_twice_leaves_the_moment_the_server_is_killed(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    dev = _dev(state, tmp_path, flow_type)
    chat = _chat_in_a_paused_turn(state, tmp_path, flow_type)

    # Kill everything at once: no goodbye from the server, nothing restarts it.
    server = json.loads((state / "engine.json").read_text())["pid"]
    assert dev.child.pid is not None
    os.kill(dev.child.pid, signal.SIGKILL)
    os.kill(server, signal.SIGKILL)
    dev.child.close()
    assert dev.child.signalstatus == signal.SIGKILL
    # Ctrl-C right away: the stop finds the server gone, says so, and does not
    # wait on calls to it; the second Ctrl-C leaves.
    chat.sendintr()
    chat.expect(_NOT_STOPPED, timeout=15)
    chat.sendintr()
    _assert_left(chat, f"lost-{RUN}")


async def test_leaving_a_session_never_started_names_the_agent_to_start_it(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str, cli_worker: Term
) -> None:
    session_id = f"never-started-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, session_id, "--agent", "agents:flow")
    chat.expect("you › ")
    chat.sendcontrol("d")
    hint = chat.expect(r"come back with `([^`]+)`")
    assert chat.wait_exit() == 0
    words = shlex.split(hint.group(1))
    assert words[1:5] == ["chat", session_id, "--agent", "agents:flow"], words

    # The command it names opens the session (it starts with the first message).
    again = spawn(words[1:], agent_env(tmp_path, flow_type), tmp_path)
    again.expect("new session: your first message starts it")
    again.expect("you › ")
    again.sendline("say back")
    again.expect("agent › said: back")
    again.expect("you › ")
    again.sendcontrol("d")
    # Started now: coming back needs no `--agent`.
    back = again.expect(r"bye; come back with `([^`]+)`")
    assert again.wait_exit() == 0
    assert shlex.split(back.group(1))[1:3] == ["chat", session_id]
    assert "--agent" not in back.group(1)
    assert "does not exist" not in again.text


async def test_a_line_the_terminal_cut_is_not_sent_and_a_piped_one_arrives_whole(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str, cli_worker: Term
) -> None:
    session_id = f"long-line-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, session_id, "--agent", "agents:flow")
    chat.expect("you › ")
    # Pasted in one line: the terminal keeps its first 4095 bytes.
    chat.sendline("say " + "x" * 5000)
    chat.expect(
        re.escape(
            "not sent: the terminal cut that line at 4095 bytes, its limit for one "
            "typed or pasted line, so its end was lost; send a long message from a "
            "file"
        )
    )
    advice = chat.expect(r"`([^`]+) < message\.txt`")
    chat.expect("you › ")
    chat.sendline("say short")
    chat.expect("agent › said: short")
    chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
    assert "said: xxxx" not in chat.text  # the cut line never reached the agent

    # The advice, as given (the session was not started then: it names the agent).
    words = shlex.split(advice.group(1))
    assert words[1:5] == ["chat", session_id, "--agent", "agents:flow"], words
    message = tmp_path / "message.txt"
    message.write_text("say " + "y" * 5000 + "\n")
    with message.open() as stdin:
        piped = await asyncio.create_subprocess_exec(
            *words,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=agent_env(tmp_path, flow_type),
            cwd=tmp_path,
        )
        output, _ = await asyncio.wait_for(piped.communicate(), timeout=60)
    text = output.decode()
    assert piped.returncode == 0, text
    assert "said:" + "y" * 5000 in "".join(text.split()), text[-2000:]

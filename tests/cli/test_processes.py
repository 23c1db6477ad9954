"""`dev`, `worker`, `chat` and `events --follow` as real processes in a pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.temporal._converter import data_converter as pydantic_data_converter
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import (
    DEX_AGENTS,
    Term,
    agent_env,
    invoke,
    spawn,
    spawn_chat,
    spawn_command,
    typed_command,
)
from support.session_harness import ledger_config

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

RUN = uuid.uuid4().hex[:6]
"""Suffix of session IDs: the run's dev server outlives a single test."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _sessions(client: Client, base: Path, flow_type: str) -> SessionClient:
    """A client of the flow that `tests/support/agents.py` serves from `base`."""
    flow = ledger_flow(ledger_config(base, flow_type))
    store = await SQLiteRuntimeStore.open(base / "runtime.sqlite")
    return SessionClient(client, flow, store)


async def test_dev_serves_the_agent_says_where_and_ctrl_c_stops_it(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    child = spawn(
        ["dev", "--agent", "agents:flow", "--state-dir", str(state)],
        agent_env(tmp_path, "DevAgent"),
        tmp_path,
    )
    child.expect("ready")
    banner = child.text
    record = json.loads((state / "engine.json").read_text())
    assert f"Temporal    {record['address']}  namespace default" in banner
    for name in ("temporal.sqlite", "temporal.log", "runtime.sqlite"):
        assert str(state / name) in banner
    assert "worker      flow DevAgent on task queue DevAgent" in banner

    # Its worker serves sessions, and other commands find its server on their own.
    client = await Client.connect(
        record["address"], data_converter=pydantic_data_converter
    )
    store = await SQLiteRuntimeStore.open(state / "runtime.sqlite")
    sessions = SessionClient(
        client, ledger_flow(ledger_config(tmp_path, "DevAgent")), store
    )
    await sessions.start("dev-1", initial_message="say hi")
    assert (await sessions.wait_for_idle("dev-1")).turns[0].final_text == "said: hi"
    await store.close()
    shown = await invoke("show", "dev-1", "--state-dir", str(state))
    assert shown.exit_code == 0, shown.output
    assert "agent › said: hi" in shown.stdout

    # The banner's inbox answers on 127.0.0.1 without a token, and so does its API,
    # whose schema is where the banner says.
    inbox = re.search(r"inbox +(http://127\.0\.0\.1:\d+)/inbox +\(API: (\S+)\)", banner)
    assert inbox, banner
    async with httpx.AsyncClient(base_url=inbox.group(1)) as web:
        page = await web.get("/inbox")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        schema = await web.get(inbox.group(2))
        assert schema.status_code == 200 and "/api/sessions" in schema.json()["paths"]
        listed = (await web.get("/api/sessions")).json()
        assert "dev-1" in json.dumps(listed)

    child.sendintr()
    child.expect("stopping the worker")
    child.expect("stopped")
    assert child.wait_exit() == 0
    assert not (state / "engine.json").exists()
    assert not _pid_alive(record["pid"])


async def test_worker_serves_the_agent_on_a_running_server(
    engine: EmbeddedEngine,
    client: Client,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    sessions = await _sessions(client, tmp_path, flow_type)
    await sessions.start(f"w-1-{RUN}", initial_message="say hello")
    snap = await sessions.wait_for_idle(f"w-1-{RUN}")
    assert snap.turns[0].final_text == "said: hello"
    assert sessions.store is not None
    await sessions.store.close()
    cli_worker.sendintr()
    cli_worker.expect("stopped")
    assert cli_worker.wait_exit() == 0


async def test_chat_drives_an_approval_and_shows_it_again_after_leaving(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    chat = spawn_chat(
        engine, tmp_path, flow_type, f"c-1-{RUN}", "--agent", "agents:flow"
    )
    chat.expect("new session")
    chat.expect("you › ")
    chat.sendline('call create_refund {"orderId": "7"}')
    first = chat.expect(r"approval needed (intr_\w+)").group(1)
    chat.expect("tool +create_refund")
    chat.expect("effect +non-idempotent write: runs at most once")
    chat.expect(re.escape('input   {"orderId": "7"}'))
    chat.expect(re.escape("approve or reject? [a/r]"))
    assert ledger.count("create_refund_started") == 0
    chat.sendline("a")
    chat.expect(f"approved create_refund \\({first}\\)")
    chat.expect(re.escape('⚙ create_refund {"orderId": "7"}'))
    chat.expect("finished: refunded order 7")
    chat.expect("agent › done: create_refund=refunded order 7")
    chat.expect("you › ")
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["7"]

    # Leave while the next approval waits: the session keeps it.
    chat.sendline('call create_refund {"orderId": "8"}')
    second = chat.expect(r"approval needed (intr_\w+)").group(1)
    chat.expect(re.escape("approve or reject? [a/r]"))
    chat.sendcontrol("d")
    chat.expect(f"left with an approval waiting.*{second}")
    assert chat.wait_exit() == 0

    # Coming back (no --agent needed) shows the history and asks again.
    chat = spawn_chat(engine, tmp_path, flow_type, f"c-1-{RUN}")
    chat.expect("history: 1 turn")
    chat.expect(
        re.escape('⚙ create_refund {"orderId": "7"} → finished, approved by ')
        + r"\S+: refunded order 7"
    )
    chat.expect("turn in progress")
    chat.expect(re.escape('you › call create_refund {"orderId": "8"}'))
    chat.expect(f"approval needed {second}")
    chat.expect(re.escape('input   {"orderId": "8"}'))
    chat.expect(re.escape("approve or reject? [a/r]"))
    chat.sendline("r")
    chat.expect("message for the agent")
    chat.sendline("not this one")
    chat.expect(f"rejected create_refund \\({second}\\) by \\S+: not this one")
    chat.expect("agent › done: create_refund=The user rejected this call: not this one")
    chat.expect("you › ")
    chat.sendline("/quit")
    chat.expect("bye")
    assert chat.wait_exit() == 0
    assert ledger.count("create_refund_started") == 1


async def test_chat_sends_messages_longer_than_the_inline_limit(
    engine: EmbeddedEngine,
    client: Client,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    # Over 2 KiB a message goes to the runtime store and travels by reference:
    # the first one starts the session, the second goes to the running one.
    session_id = f"c-long-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, session_id, "--agent", "agents:flow")
    chat.expect("you › ")
    texts = ["long " * 600 + f"{mark}-{RUN}" for mark in ("FIRST", "SECOND")]
    for text in texts:
        chat.sendline(f"say {text}")
        chat.expect("agent › said: long")
        chat.expect(text[-12:])
        chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
    sessions = await _sessions(client, tmp_path, flow_type)
    snapshot = await sessions.snapshot(session_id, turns=2)
    # The transcript holds each message and answer whole.
    said = [m.text for m in snapshot.messages if m.role == "assistant"]
    assert said == [f"said: {t}" for t in texts]
    assert sessions.store is not None
    await sessions.store.close()


async def test_a_chat_card_answered_elsewhere_is_refreshed(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    sid = f"c-elsewhere-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, sid, "--agent", "agents:flow")
    chat.expect("you › ")
    chat.sendline('call create_refund {"orderId": "12"}')
    interrupt_id = chat.expect(r"approval needed (intr_\w+)").group(1)
    chat.expect(re.escape("approve or reject? [a/r]"))
    # Someone else approves (another terminal, the inbox, code); nobody types here.
    sessions = await _sessions(await engine.client(), tmp_path, flow_type)
    try:
        assert await sessions.resolve_interrupt(sid, interrupt_id, approved=True)
    finally:
        assert sessions.store is not None
        await sessions.store.close()
    chat.expect("answered elsewhere")
    chat.expect(f"approved create_refund \\({interrupt_id}\\)")
    chat.expect("agent › done: create_refund=refunded order 12")
    chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
    assert ledger.count("create_refund_started") == 1


async def test_chat_shows_progress_and_ctrl_c_stops_the_turn_then_leaves(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As in a venv that is not activated: the command's `bin/` is not on PATH,
    # so the way back must name it by its path (whatever PATH the run has).
    venv_bin = str(Path(DEX_AGENTS).parent)
    path = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in path if d != venv_bin))
    assert typed_command() == DEX_AGENTS
    chat = spawn_chat(
        engine, tmp_path, flow_type, f"c-2-{RUN}", "--agent", "agents:flow"
    )
    chat.expect("you › ")
    chat.sendline("say slow ;; pause g1")
    chat.expect(r"working \d+s")
    # Ctrl-C while the chat waits for the model stops the turn; at the prompt, it leaves.
    chat.sendintr()
    chat.expect("■ stopped turn-1")
    chat.expect("you › ")
    chat.sendintr()
    # The way back names the command as it was run (a venv's `bin/` is often not on PATH).
    chat.expect_exact(
        f"bye; come back with `{typed_command()} chat c-2-{RUN} --state-dir"
    )
    assert chat.wait_exit() == 0

    chat = spawn_chat(engine, tmp_path, flow_type, f"c-2-{RUN}")
    chat.expect("■ the turn was cancelled")
    chat.expect("you › ")
    chat.sendline("say again")
    chat.expect("agent › said: again")
    chat.expect("you › ")
    chat.sendcontrol("d")
    assert chat.wait_exit() == 0


async def test_events_follow_prints_new_events_until_ctrl_c(
    client: Client,
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    sessions = await _sessions(client, tmp_path, flow_type)
    await sessions.start(f"e-1-{RUN}", initial_message="say one")
    await sessions.wait_for_idle(f"e-1-{RUN}")
    follow = spawn_command(
        engine, tmp_path, flow_type, "events", f"e-1-{RUN}", "--follow"
    )
    follow.expect('text_delta +"said: one"')
    follow.expect("turn_completed")
    await sessions.send_user_message(f"e-1-{RUN}", "say two")
    follow.expect('text_delta +"said: two"')
    follow.expect("turn_completed")
    assert sessions.store is not None
    await sessions.store.close()
    assert follow.stop() == 0

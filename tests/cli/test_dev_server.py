"""`dev`'s Temporal server as a user meets it: one address, the Web UI, takeover, outages.

Every test runs the real commands in a pseudo-terminal on a state directory of
its own, and checks what they print and which server processes remain.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient
from dex_agents.temporal._converter import data_converter as pydantic_data_converter
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import Term, agent_env, spawn
from support.session_harness import ledger_config

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


RUN = uuid.uuid4().hex[:6]


def _dev(state: Path, base: Path, flow_type: str, *extra: str) -> Term:
    """`dex-agents dev` serving the ledger flow of `base` on `state`."""
    return spawn(
        ["dev", "--agent", "agents:flow", "--state-dir", str(state), *extra],
        agent_env(base, flow_type),
        base,
    )


def _banner(child: Term) -> tuple[str, str]:
    """The Temporal address and the Web UI line of a `dev` banner."""
    child.expect("ready")
    address = re.search(r"Temporal +(\S+) +namespace", child.text)
    ui = re.search(r"Web UI +(.+)", child.text)
    assert address and ui, child.text
    return address.group(1), ui.group(1).strip()


def _lost_line(address: str, state: Path, meanwhile: str) -> str:
    """The one line of advice per outage, as a pattern (the command may be a path)."""
    return re.escape(
        f"lost the Temporal server at {address}; start it again with `"
    ) + (
        r"\S*dex-agents"
        + re.escape(f" dev --agent module:flow --state-dir {state}` ({meanwhile})")
    )


def _record(state: Path) -> dict[str, object]:
    return json.loads((state / "engine.json").read_text())


def _servers_of(state: Path) -> list[int]:
    """Live dev servers on `state`'s SQLite file."""
    needle = os.fsencode(str(state / "temporal.sqlite"))
    pids: list[int] = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        zombie = stat.rsplit(")", 1)[1].split()[0] == "Z"
        if b"start-dev" in cmdline and needle in cmdline and not zombie:
            pids.append(int(entry.name))
    return pids


def _assert_no_server_left(state: Path) -> None:
    deadline = time.monotonic() + 15
    while left := _servers_of(state):
        if time.monotonic() > deadline:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"dev servers left running: {left}")
        time.sleep(0.1)


async def test_dev_keeps_its_address_and_web_ui_across_restarts(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    seen: list[tuple[str, str]] = []
    for _ in range(3):
        child = _dev(state, tmp_path, flow_type)
        address, ui = _banner(child)
        assert ui.startswith("http://127.0.0.1:"), ui
        async with httpx.AsyncClient() as http:
            response = await http.get(ui)
        assert response.status_code == 200, response.text[:300]
        assert "<html" in response.text.lower()
        seen.append((address, ui))
        assert child.stop() == 0
        _assert_no_server_left(state)
    assert len(set(seen)) == 1, seen
    ports = json.loads((state / "ports.json").read_text())
    assert seen[0] == (
        f"127.0.0.1:{ports['port']}",
        f"http://127.0.0.1:{ports['ui_port']}/namespaces/default/workflows",
    )


async def test_dev_on_a_taken_port_names_it_and_the_fix_and_no_ui_turns_the_ui_off(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()
        port = foreign.getsockname()[1]
        (state / "ports.json").write_text(json.dumps({"version": 1, "port": port}))
        child = _dev(state, tmp_path, flow_type)
        assert child.wait_exit() == 1
    error = re.search(r"error: (.+)", child.text)
    assert error, child.text
    assert f"port {port} on 127.0.0.1" in error.group(1)
    assert "in use by another process" in error.group(1)
    assert "`--port`" in error.group(1)
    assert "Traceback" not in child.text
    _assert_no_server_left(state)

    # `--port` moves the server; `--no-ui` keeps it headless.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        moved = probe.getsockname()[1]
    child = _dev(state, tmp_path, flow_type, "--port", str(moved), "--no-ui")
    address, ui = _banner(child)
    assert address == f"127.0.0.1:{moved}"
    assert ui == "off (--no-ui)"
    assert _record(state)["ui_port"] is None
    assert child.stop() == 0
    assert json.loads((state / "ports.json").read_text())["port"] == moved


async def test_a_second_dev_takes_over_and_a_killed_server_comes_back(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    first = _dev(state, tmp_path, flow_type)
    address, _ = _banner(first)
    second = _dev(state, tmp_path, flow_type)
    assert _banner(second)[0] == address
    assert "reused; taken over here if its owner stops" in second.text
    shared = _record(state)["pid"]

    # The first stops its server; the second starts it again on the same address.
    assert first.stop() == 0
    second.expect(f"the Temporal server on {address} \\(pid {shared}\\) is gone")
    second.expect(
        f"the Temporal server on {address} is back \\(pid \\d+, started here\\)"
    )
    taken = _record(state)
    assert taken["address"] == address and taken["pid"] != shared

    client = await Client.connect(address, data_converter=pydantic_data_converter)
    store = await SQLiteRuntimeStore.open(state / "runtime.sqlite")
    try:
        sessions = SessionClient(
            client, ledger_flow(ledger_config(tmp_path, flow_type)), store
        )
        session_id = f"takeover-{RUN}"
        await sessions.start(session_id, initial_message="say hi")
        assert (await sessions.wait_for_idle(session_id)).turns[0].final_text == (
            "said: hi"
        )

        # A killed server: one line, then it is back where it was, sessions and all.
        killed = taken["pid"]
        assert isinstance(killed, int)
        os.kill(killed, signal.SIGKILL)
        second.expect(f"the Temporal server on {address} \\(pid {killed}\\) is gone")
        second.expect(f"the Temporal server on {address} is back")
        await sessions.send_user_message(session_id, "say again")
        snapshot = await sessions.wait_for_idle(session_id)
        assert snapshot.turns[-1].final_text == "said: again"
    finally:
        await store.close()
    assert "WARN" not in second.text and "tcp connect error" not in second.text
    assert second.stop() == 0
    _assert_no_server_left(state)


async def test_a_chat_across_server_stops_says_so_once_per_outage(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    dev = _dev(state, tmp_path, flow_type)
    address, _ = _banner(dev)
    chat = spawn(
        ["chat", f"outage-{RUN}", "--agent", "agents:flow", "--state-dir", str(state)],
        agent_env(tmp_path, flow_type),
        tmp_path,
    )
    chat.expect("you › ")
    lost = _lost_line(address, state, "this chat waits and reconnects")
    for outage, gate in enumerate(("g1", "g2"), start=1):
        chat.sendline(f"say {gate} ;; pause {gate}")
        chat.expect(r"working \d+s")
        assert dev.stop() == 0  # the worker and the server stop
        chat.expect(lost, timeout=60)
        dev = _dev(state, tmp_path, flow_type)
        assert _banner(dev)[0] == address
        chat.expect_exact(f"the Temporal server at {address} is back")
        (tmp_path / "gates" / gate).write_text("")
        chat.expect(f"agent › said: {gate}", timeout=90)
        chat.expect("you › ")
        assert chat.text.count("lost the Temporal server") == outage, chat.text
    for flood in ("WARN", "tcp connect error", "UNAVAILABLE", "Traceback"):
        assert flood not in chat.text, chat.text
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
    assert dev.stop() == 0
    _assert_no_server_left(state)


async def test_a_worker_across_a_server_stop_says_so_once_and_serves_again(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state"
    dev = spawn(["dev", "--state-dir", str(state)], dict(os.environ), tmp_path)
    address, _ = _banner(dev)
    worker = spawn(
        ["worker", "--agent", "agents:flow", "--state-dir", str(state)],
        agent_env(tmp_path, flow_type),
        tmp_path,
    )
    worker.expect("ready")
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    assert dev.stop() == 0
    worker.expect(_lost_line(address, state, "the worker waits and reconnects"))
    # The outage lasts until a call of this test's own has retried to the end:
    # by then the worker's polls have been retried as often, each of which
    # Temporal's core would log as a WARN line.
    with pytest.raises(RPCError) as info:
        await client.get_workflow_handle(f"nobody-{RUN}").describe()
    assert info.value.status == RPCStatusCode.UNAVAILABLE
    dev = spawn(["dev", "--state-dir", str(state)], dict(os.environ), tmp_path)
    assert _banner(dev)[0] == address
    worker.expect_exact(f"the Temporal server at {address} is back")

    store = await SQLiteRuntimeStore.open(state / "runtime.sqlite")
    try:
        sessions = SessionClient(
            client, ledger_flow(ledger_config(tmp_path, flow_type)), store
        )
        session_id = f"worker-outage-{RUN}"
        await sessions.start(session_id, initial_message="say back")
        snapshot = await sessions.wait_for_idle(session_id)
        assert snapshot.turns[0].final_text == "said: back"
    finally:
        await store.close()
    assert worker.text.count("lost the Temporal server") == 1
    assert "WARN" not in worker.text and "tcp connect error" not in worker.text
    assert worker.stop() == 0
    assert dev.stop() == 0
    _assert_no_server_left(state)

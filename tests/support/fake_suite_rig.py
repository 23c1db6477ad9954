"""Runs the suite's agent on the dev server, in-process or in a killable worker.

`in_process` serves the flow from a worker in the test process; `worker_process`
serves it from a `WorkerProcess` that a test can SIGKILL and restart. Either way
the test talks to the session through `SessionClient` and counts side effects in
the shared `Ledger`, and the fake CLI waits at gates in the rig's gate directory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from dex_agents.session._state import Interrupt
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.temporal._snapshot import AgentSnapshot
from dex_agents.testing import Ledger, WorkerProcess
from dex_agents.testing._worker_process import WorkerProcessConfig
from support.fake_cli import with_support_importable
from support.fake_suite_agent import BASH_LOG, CONFIG_ENV, SuiteConfig, build_flow
from support.gates import gate_reached, open_gate
from support.session_harness import in_process_worker

AGENT_FILE = Path(__file__).with_name("fake_suite_agent.py")
"""Where a worker subprocess finds the agent (`flow_ref` by file path)."""


@dataclass(frozen=True, kw_only=True)
class SuiteEnv:
    """What each test gets from the fixtures: the dev server and its own names."""

    engine: EmbeddedEngine
    client: Client
    tmp_path: Path
    flow_type: str

    def config(self, **changes: Any) -> SuiteConfig:
        """The test's agent config; `changes` are `SuiteConfig` fields."""
        config = SuiteConfig(
            flow_type=self.flow_type,
            ledger_path=str(self.tmp_path / "ledger.jsonl"),
            gate_dir=str(self.tmp_path / "gates"),
            workdir=str(self.tmp_path / "sessions"),
        )
        return dataclasses.replace(config, **changes)


@dataclass(kw_only=True)
class SuiteRig:
    """One test's agent: its session client, ledger, gates and working dirs."""

    config: SuiteConfig
    sessions: SessionClient
    ledger: Ledger
    worker: WorkerProcess | None = None

    @property
    def gate_dir(self) -> Path:
        return Path(self.config.gate_dir)

    def cwd(self, session_id: str) -> Path:
        """The session's working directory, where the fake CLI runs Bash."""
        return Path(self.config.workdir) / session_id

    def bash_log(self, session_id: str) -> list[str]:
        """What the session's Bash commands appended to `bash.log`, by line."""
        path = self.cwd(session_id) / BASH_LOG
        return path.read_text().splitlines() if path.exists() else []

    async def reached(self, gate: str, timeout: float = 60.0) -> None:
        """Wait until something stopped at `gate`."""
        await gate_reached(self.gate_dir, gate, timeout)

    def open_gate(self, gate: str) -> None:
        """Let whatever waits at `gate` go on (and pass it at once from now on)."""
        open_gate(self.gate_dir, gate)

    async def interrupt(self, session_id: str) -> Interrupt:
        """The one approval the idle session waits for."""
        snapshot = await self.sessions.wait_for_idle(session_id)
        assert snapshot.status == "waiting_for_approval", snapshot
        (interrupt,) = snapshot.pending_interrupts
        return interrupt

    async def resolve(
        self, session_id: str, *, approved: bool = True, message: str | None = None
    ) -> AgentSnapshot:
        """Resolve the one pending approval, then wait until the session is idle."""
        interrupt = await self.interrupt(session_id)
        assert await self.sessions.resolve_interrupt(
            session_id,
            interrupt.interrupt_id,
            approved=approved,
            rejection_message=message,
        )
        return await self.sessions.wait_for_idle(session_id)

    async def approve(self, session_id: str) -> Interrupt:
        """Approve the one pending approval; the turn goes on (maybe to a gate)."""
        interrupt = await self.interrupt(session_id)
        assert await self.sessions.resolve_interrupt(
            session_id, interrupt.interrupt_id, approved=True
        )
        return interrupt

    def app_hook_calls(self, tool_use_id: str | None = None) -> list[dict[str, Any]]:
        """The calls the application's hooks saw (of one tool use ID)."""
        return [
            e
            for e in self.ledger.entries("app_hook")
            if tool_use_id is None or e.get("tool_use_id") == tool_use_id
        ]


@asynccontextmanager
async def in_process(env: SuiteEnv, **changes: Any) -> AsyncIterator[SuiteRig]:
    """The agent served by a worker inside the test process."""
    config = env.config(**changes)
    flow = build_flow(config)
    store_path = env.tmp_path / "runtime.sqlite"
    async with in_process_worker(env.client, flow, store_path) as served:
        yield SuiteRig(
            config=config, sessions=served.sessions, ledger=Ledger(config.ledger_path)
        )


@asynccontextmanager
async def worker_process(env: SuiteEnv, **changes: Any) -> AsyncIterator[SuiteRig]:
    """The agent served by a worker subprocess that the test may SIGKILL."""
    config = env.config(**changes)
    store_path = env.tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(store_path)
    worker = WorkerProcess(
        WorkerProcessConfig(
            address=env.engine.address,
            namespace=env.engine.namespace,
            store_path=str(store_path),
            flow_ref=f"{AGENT_FILE}:flow_from_env",
        ),
        env.tmp_path,
        env=with_support_importable({**os.environ, CONFIG_ENV: config.to_json()}),
    )
    try:
        with worker:
            yield SuiteRig(
                config=config,
                # The client side needs only the flow's type and task queue.
                sessions=SessionClient(env.client, build_flow(config), store),
                ledger=Ledger(config.ledger_path),
                worker=worker,
            )
    finally:
        await store.close()


@pytest.fixture
def suite(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> SuiteEnv:
    """The shared dev server, a fresh flow type (and task queue), a temp dir."""
    return SuiteEnv(
        engine=engine, client=client, tmp_path=tmp_path, flow_type=flow_type
    )

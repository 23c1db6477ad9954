"""The production topology under faults: three workers, PostgreSQL, S3, one Temporal endpoint.

Twenty sessions run at once on three worker processes that share the dev
server (the cluster endpoint), one PostgreSQL runtime store and one S3 bucket
on moto's server. Each session reads, asks for a write a person approves, sends
an image and says goodbye. During the run one worker is SIGKILLed in the middle
of a model segment, another while a tool Step runs, and PostgreSQL restarts
while a segment waits to write its turn. Side effects are counted in a ledger.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.postgres import PostgresRuntimeStore
from dex_agents.s3 import S3MediaStore
from dex_agents.session._media import ImageReference
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing import Ledger, WorkerProcess
from dex_agents.testing._postgres_server import PostgresTestServer
from dex_agents.testing._worker_process import WorkerProcessConfig
from support import SUPPORT_DIR
from support.moto_s3 import MotoS3, moto_s3
from support.postgres_support import postgres_or_skip
from support.topology_flow import make_flow

FLOW_FILE = SUPPORT_DIR / "topology_flow.py"
SESSIONS = 20
WORKERS = 3
BUCKET = "topology-media"

# A module mark: pytest-timeout reads the limit before fixtures run.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def postgres() -> Iterator[PostgresTestServer]:
    """Its own cluster: the test restarts it."""
    with postgres_or_skip() as server:
        yield server


@pytest.fixture
def s3() -> Iterator[MotoS3]:
    with moto_s3() as server:
        server.client().create_bucket(Bucket=BUCKET)
        yield server


class Chaos:
    """Gates in a shared directory: who stopped where, and the faults at each."""

    def __init__(self, gate_dir: Path, workers: list[WorkerProcess]) -> None:
        self.gate_dir = gate_dir
        self.workers = workers
        self.killed: list[int] = []
        self.done = {
            gate: asyncio.Event()
            for gate in ("step-kill", "segment-kill", "postgres-restart")
        }
        self.refunded = 0
        self.all_refunded = asyncio.Event()
        """Set once every session's approved refund completed: no refund is in
        flight when a worker is killed. A refund whose worker dies mid-Step is
        honestly `outcome_unknown`, not the answer these sessions assert."""

    def refund_done(self) -> None:
        self.refunded += 1
        if self.refunded == SESSIONS:
            self.all_refunded.set()

    async def holder(self, gate: str) -> WorkerProcess:
        """The worker process that stopped at `gate` (it wrote `<gate>.pid`)."""
        path = self.gate_dir / f"{gate}.pid"
        async with asyncio.timeout(60):
            while not (path.exists() and (self.gate_dir / f"{gate}.reached").exists()):
                await asyncio.sleep(0.02)
        pid = int(path.read_text())
        (worker,) = [w for w in self.workers if w.process and w.process.pid == pid]
        return worker

    async def kill_at(self, gate: str) -> None:
        """SIGKILL the worker stopped at `gate`, start it again, open the gate."""
        worker = await self.holder(gate)
        assert worker.process is not None
        self.killed.append(worker.process.pid)
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait()
        await asyncio.to_thread(worker.start)
        (self.gate_dir / gate).write_text("")
        self.done[gate].set()


def _image(n: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + f"image of session {n}".encode() * 50


async def _session(
    sessions: SessionClient, media: S3MediaStore, n: int, chaos: Chaos
) -> list[tuple[str, str]]:
    """One session's conversation; returns each (prompt, answer) it saw."""
    sid = f"topology-{n}"
    seen: list[tuple[str, str]] = []

    async def turn(prompt: str, images: list[ImageReference] | None = None) -> str:
        snap = await sessions.send_and_wait(sid, prompt, images)
        seen.append((prompt, snap.turns[-1].final_text))
        return snap.turns[-1].final_text

    assert await sessions.start(sid)
    read = f'call lookup_order {{"orderId": "o{n}"}}'
    assert await turn(read) == f"done: order o{n}: arrived broken"

    write = f'call create_refund {{"orderId": "r{n}"}}'
    assert await sessions.send_user_message(sid, write)
    snap = await sessions.wait_for_idle(sid)
    assert snap.status == "waiting_for_approval", snap
    (interrupt,) = snap.pending_interrupts
    assert await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    snap = await sessions.wait_for_idle(sid)
    seen.append((write, snap.turns[-1].final_text))
    assert snap.turns[-1].final_text == f"done: create_refund=refunded order r{n}"
    chaos.refund_done()

    if n == 1:  # the tool Step its worker dies in, once no refund is in flight
        await chaos.all_refunded.wait()
        mail = f'call send_email {{"to": "s{n}@example.com", "gate": "step-kill"}}'
        assert await turn(mail) == f"done: send_email=sent to s{n}@example.com"

    ref = await media.put_image(_image(n), "image/png")
    digest = hashlib.sha256(_image(n)).hexdigest()
    assert await turn(f"look {n}", images=[ref]) == f"images: {digest}"

    # One fault at a time, so each gate is held by a worker no earlier fault killed.
    bye = ""
    if n == 0:
        await chaos.done["step-kill"].wait()
        bye = " ;; pause segment-kill"
    elif n == 2:
        await chaos.done["segment-kill"].wait()
        bye = " ;; pause postgres-restart"
    assert await turn(f"say bye {n}{bye}") == f"said: bye {n}"
    return seen


async def test_twenty_sessions_on_three_workers_survive_kills_and_a_postgres_restart(
    engine: EmbeddedEngine,
    client: Client,
    postgres: PostgresTestServer,
    s3: MotoS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate_dir = tmp_path / "gates"
    gate_dir.mkdir()
    ledger = Ledger(tmp_path / "ledger.jsonl")
    settings = {
        **s3.env(),
        "TOPOLOGY_LEDGER": str(ledger.path),
        "TOPOLOGY_GATES": str(gate_dir),
        "TOPOLOGY_S3_ENDPOINT": s3.endpoint_url,
        "TOPOLOGY_BUCKET": BUCKET,
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    dsn = postgres.create_database("topology")
    config = WorkerProcessConfig(
        address=engine.address,
        namespace=engine.namespace,
        store_path=dsn,
        flow_ref=f"{FLOW_FILE}:make_flow",
    )
    workers = []
    for i in range(WORKERS):
        (tmp_path / f"worker-{i}").mkdir()
        workers.append(
            WorkerProcess(config, tmp_path / f"worker-{i}", env=dict(os.environ))
        )
    flow = make_flow()
    store = await PostgresRuntimeStore.open(dsn)
    media = S3MediaStore(BUCKET, client=s3.client())
    chaos = Chaos(gate_dir, workers)
    try:
        for worker in workers:
            await asyncio.to_thread(worker.start)
        first_pids = [w.process.pid for w in workers if w.process is not None]
        sessions = SessionClient(client, flow, store)

        async def faults() -> None:
            await chaos.kill_at("step-kill")
            await chaos.kill_at("segment-kill")
            await chaos.holder("postgres-restart")
            await asyncio.to_thread(postgres.restart)
            (gate_dir / "postgres-restart").write_text("")
            chaos.done["postgres-restart"].set()

        async with asyncio.TaskGroup() as group:
            group.create_task(faults())
            running = [
                group.create_task(_session(sessions, media, n, chaos))
                for n in range(SESSIONS)
            ]
        conversations = [task.result() for task in running]
        assert all(event.is_set() for event in chaos.done.values())

        # Every session finished, and holds each of its messages exactly once, in order.
        # A turn whose publish met the Postgres restart reaches the store's history
        # when its idle session publishes again (5 s later): wait for that.
        for n, seen in enumerate(conversations):
            expected = [([p], a) for p, a in seen]
            async with asyncio.timeout(60):
                while True:
                    turns = [t async for t in sessions.history(f"topology-{n}")][::-1]
                    if len(turns) >= len(expected):
                        break
                    await asyncio.sleep(0.5)
            assert [(t.prompts, t.final_text) for t in turns] == expected, n
            assert all(t.status == "completed" for t in turns), n
            assert (await sessions.snapshot(f"topology-{n}")).status == "idle"
        # Every write ran exactly once; the killed Step's write ran on its retry.
        refunds = Counter(str(e["order_id"]) for e in ledger.entries("create_refund"))
        assert refunds == Counter({f"r{n}": 1 for n in range(SESSIONS)})
        assert ledger.count("create_refund_started") == SESSIONS
        attempts = ledger.entries("send_email_attempt")
        assert [a["attempt"] for a in attempts] == [1, 2]
        assert len({str(a["key"]) for a in attempts}) == 1
        assert ledger.count("send_email") == 1
        assert ledger.count("lookup_order") == SESSIONS
        # The faults happened where they were meant to, on different processes.
        assert len(chaos.killed) == 2
        assert len(set(chaos.killed)) == 2
        # The sessions were spread over the workers: tools ran in every first process.
        ran_on = {int(str(e["pid"])) for e in ledger.entries("tool_ran")}
        assert set(first_pids) <= ran_on, (first_pids, ran_on)
    finally:
        await store.close()
        for worker in workers:
            worker.__exit__(None, None, None)

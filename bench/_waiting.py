"""Figure 5: thousands of sessions waiting for approval on one worker process.

A session waiting for a person must cost nothing but a little state: no
process, no thread, no slot. The worker runs in a subprocess, so its resident
memory can be read from /proc and its children counted, and the sessions run
the scripted ledger flow, so creating thousands of them takes minutes, not
hours of CLI start-ups. As many sessions are created as the time budget allows,
up to 10,000 (the design's figure) and never fewer than 2,000.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import WorkerProcess
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow
from dex_agents.testing._worker_process import WorkerProcessConfig

from . import _stats
from ._procs import descendants, rss_mb, thread_count
from ._report import Row
from ._rig import BenchError, Rig

TARGET_SESSIONS = 10_000
MIN_SESSIONS = 2_000
CREATORS = 16
"""Sessions created at once. The dev server's SQLite commits bound the rate
(about 6 sessions/s on a 2-core VM); more creators only lengthen each start."""
POLL_SECONDS = 0.2
"""How often a creator reads its session's projection: rarely, as it costs CPU."""
RESUMES = 12
"""Waiting sessions resumed at the end, spread from the oldest to the newest."""
BASELINE_RESUMES = 5
CACHED_WORKFLOWS = 1_000
"""The worker's `max_cached_workflows` (Temporal's default, kept by `create_worker`)."""


@dataclass(kw_only=True)
class _Fleet:
    """The sessions created so far and their pending interrupts."""

    flow: AgentSessionFlow
    store: SQLiteRuntimeStore
    """The worker's runtime store, read for its snapshot projections."""
    interrupts: dict[str, str]
    started: int = 0
    """Sessions of the mass creation started so far (not counting the baseline's)."""


async def _create(rig: Rig, fleet: _Fleet, session_id: str, number: int) -> None:
    """Start one session whose first turn waits for approval of a refund.

    Completion is read from the runtime store's snapshot projection, not asked
    of the session: a `wait_for_idle` Update and a Query per session would add
    history and workflow tasks that a waiting session never needs.
    """
    await SessionClient(rig.client, fleet.flow).start(
        session_id,
        initial_message=f'call create_refund {{"orderId": "{number}"}}',
    )
    async with asyncio.timeout(60):
        while True:
            snapshot = await fleet.store.get_snapshot(session_id)
            status = snapshot.get("status") if snapshot else None
            if status == "waiting_for_approval":
                break
            if status not in (None, "running"):
                raise BenchError(f"{session_id} is {status}, not waiting")
            await asyncio.sleep(POLL_SECONDS)
    assert snapshot is not None
    pending = snapshot["pending_interrupts"]
    assert isinstance(pending, list) and isinstance(pending[0], dict)
    fleet.interrupts[session_id] = str(pending[0]["interrupt_id"])


async def _resume(rig: Rig, fleet: _Fleet, session_id: str) -> float:
    """Approve the session's refund; seconds until its turn completed."""
    handle = rig.client.get_workflow_handle(session_id)
    started = time.monotonic()
    await SessionClient(rig.client, fleet.flow).resolve_interrupt(
        session_id,
        interrupt_id=fleet.interrupts[session_id],
        approved=True,
    )
    await handle.execute_update("wait_for_idle", result_type=int)
    elapsed = time.monotonic() - started
    snapshot = await SessionClient(rig.client, fleet.flow, fleet.store).snapshot(
        session_id, turns=1
    )
    turn = snapshot.turns[-1]
    if turn.status != "completed" or "refunded" not in turn.final_text:
        raise BenchError(f"{session_id} resumed to {turn.status}: {turn.error}")
    return elapsed


async def _create_many(
    rig: Rig, fleet: _Fleet, worker_pid: int, target: int, minimum: int, budget: float
) -> list[tuple[int, float]]:
    """Create sessions until `target`, or `budget` seconds once `minimum` exist.

    Returns (sessions, worker RSS MB) checkpoints along the way.
    """
    deadline = time.monotonic() + budget
    checkpoints: list[tuple[int, float]] = []
    step = max(target // 20, 1)

    def more() -> bool:
        if fleet.started >= target:
            return False
        return fleet.started < minimum or time.monotonic() < deadline

    async def creator() -> None:
        while more():
            number = fleet.started
            fleet.started += 1
            await _create(rig, fleet, f"waiting-{number:05d}", number)
            done = len(fleet.interrupts)
            if done % step == 0:
                checkpoints.append((done, rss_mb(worker_pid)))
                rig.progress.log(
                    f"5 waiting sessions: {done} waiting, worker RSS "
                    f"{checkpoints[-1][1]:.0f} MB"
                )

    async with asyncio.TaskGroup() as group:
        for _ in range(CREATORS):
            group.create_task(creator())
    return checkpoints


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What figure 5 measured, before it becomes rows."""

    count: int
    """Sessions waiting for approval at the end."""
    created_s: float
    rss_before: float
    rss_after: float
    checkpoints: list[tuple[int, float]]
    """(sessions waiting, worker RSS MB) along the way."""
    threads: tuple[int, int]
    children: tuple[int, int]
    baseline: list[float]
    """Resume latencies (s) with no other session waiting."""
    resumes: list[float]
    evicted: list[bool]
    """Per resume: whether the session had left the worker's cache (replayed)."""


def project(m: Measured) -> float:
    """RSS growth projected to `TARGET_SESSIONS`, from the slope the run ended on.

    The worker caches at most 1,000 workflows (Temporal's default), so memory
    grows fast until the cache is full and slowly after; a straight line from
    zero would overstate 10,000 sessions. Past the cache the slope is taken
    from the first checkpoint beyond it (never below zero: memory a process
    once touched rarely goes back); before it, the line from zero is all
    there is.
    """
    growth = m.rss_after - m.rss_before
    if m.count >= TARGET_SESSIONS:
        return growth
    beyond = [(n, mb) for n, mb in m.checkpoints if n > CACHED_WORKFLOWS]
    if beyond and beyond[0][0] < m.count:
        first_n, first_mb = beyond[0]
        slope = max(0.0, (m.rss_after - first_mb) / (m.count - first_n))
    else:
        slope = growth / m.count
    return growth + slope * (TARGET_SESSIONS - m.count)


async def waiting_sessions(rig: Rig, *, budget: float) -> tuple[list[Row], Any]:
    """Park as many sessions as `budget` seconds allow, then measure the worker."""
    target, minimum = (300, 200) if rig.quick else (TARGET_SESSIONS, MIN_SESSIONS)
    flow_config = LedgerFlowConfig(
        flow_type="BenchWaiting",
        ledger_path=str(rig.tmp / "waiting-ledger.jsonl"),
        gate_dir=str(rig.directory("waiting-gates")),
    )
    store_path = rig.tmp / "waiting-runtime.sqlite"
    fleet = _Fleet(
        flow=ledger_flow(flow_config),
        store=await SQLiteRuntimeStore.open(store_path),
        interrupts={},
    )
    worker = WorkerProcess(
        WorkerProcessConfig(
            address=rig.engine.address,
            namespace=rig.engine.namespace,
            store_path=str(store_path),
            flow=flow_config,
        ),
        rig.directory("waiting-worker"),
    )
    await asyncio.to_thread(worker.start)
    try:
        assert worker.process is not None
        measured = await _measure(
            rig, fleet, worker.process.pid, target, minimum, budget
        )
    finally:
        await asyncio.to_thread(worker.__exit__, None, None, None)
        await fleet.store.close()
    return _rows(measured), asdict(measured)


async def _measure(
    rig: Rig, fleet: _Fleet, pid: int, target: int, minimum: int, budget: float
) -> Measured:
    # Warm the worker's code paths, and take the baseline: a resume with
    # nothing else waiting.
    for n in range(BASELINE_RESUMES):
        await _create(rig, fleet, f"baseline-{n}", n)
    baseline = [await _resume(rig, fleet, s) for s in list(fleet.interrupts)]
    fleet.interrupts.clear()
    await asyncio.sleep(1)
    rss_before, children_before = rss_mb(pid), descendants(pid)
    threads_before = thread_count(pid)
    started = time.monotonic()
    checkpoints = await _create_many(rig, fleet, pid, target, minimum, budget)
    created_s = time.monotonic() - started
    count = len(fleet.interrupts)
    await asyncio.sleep(2)  # let the last Steps' garbage go
    rss_after, children_after = rss_mb(pid), descendants(pid)
    threads_after = thread_count(pid)
    # Creation order: the first ones left the worker's cache long ago.
    waiting = sorted(fleet.interrupts)
    indexes = [i * (count - 1) // (RESUMES - 1) for i in range(RESUMES)]
    resumes = [await _resume(rig, fleet, waiting[i]) for i in indexes]
    rig.progress.log(f"5 waiting sessions: resumed {len(resumes)}")
    return Measured(
        count=count,
        created_s=created_s,
        rss_before=rss_before,
        rss_after=rss_after,
        checkpoints=checkpoints,
        threads=(threads_before, threads_after),
        children=(len(children_before), len(children_after)),
        baseline=baseline,
        resumes=resumes,
        evicted=[i < count - CACHED_WORKFLOWS for i in indexes],
    )


def _rows(m: Measured) -> list[Row]:
    growth = m.rss_after - m.rss_before
    projected = project(m)
    memory_note = (
        f"{growth * 1024 / m.count:.0f} KB per session; worker RSS at "
        + ", ".join(f"{n:,}: {mb:.0f} MB" for n, mb in m.checkpoints)
        + f"; threads {m.threads[0]} → {m.threads[1]}; "
        f"{m.count / m.created_s:.1f} sessions created per second"
    )
    if m.count < TARGET_SESSIONS:
        basis = (
            f"the slope after the worker's {CACHED_WORKFLOWS:,}-workflow cache filled"
            if m.count > CACHED_WORKFLOWS
            else "a straight line (the cache never filled)"
        )
        memory_note += (
            f"; projected to {TARGET_SESSIONS:,}: {projected:.0f} MB, from {basis}"
        )
    evicted = [r for r, out in zip(m.resumes, m.evicted, strict=True) if out]
    cached = [r for r, out in zip(m.resumes, m.evicted, strict=True) if not out]
    resume_note = "sessions picked evenly from the oldest to the newest"
    if evicted and cached:
        resume_note += (
            f"; medians {_stats.median(evicted) * 1000:.0f} ms for the "
            f"{len(evicted)} evicted from the worker's cache (replayed first) and "
            f"{_stats.median(cached) * 1000:.0f} ms for the {len(cached)} still cached"
        )
    return [
        Row(
            key="5a",
            figure=f"worker RSS growth with {m.count:,} sessions waiting for approval",
            unit="MB",
            median=growth,
            p95=None,
            samples=1,
            target=f"≤ 300 MB at {TARGET_SESSIONS:,}",
            met=projected <= 300,
            baseline=m.rss_before,
            baseline_label="RSS before",
            note=memory_note,
        ),
        Row(
            key="5b",
            figure=f"child processes of the worker with {m.count:,} sessions waiting",
            unit="count",
            median=float(m.children[1]),
            p95=None,
            samples=1,
            target="0 (no process per session)",
            met=m.children[1] == 0,
            baseline=float(m.children[0]),
            baseline_label="before",
        ),
        Row(
            key="5c",
            figure=f"resolve → turn completed, one of {m.count:,} waiting sessions",
            unit="ms",
            median=_stats.median(m.resumes) * 1000,
            p95=_stats.p95(m.resumes) * 1000,
            samples=len(m.resumes),
            baseline=_stats.median(m.baseline) * 1000,
            baseline_label="no other session waiting",
            ratio=_stats.median(m.resumes) / _stats.median(m.baseline),
            note=resume_note,
        ),
    ]

"""The hot resume window on the real bundled CLI and the dev server.

After a segment defers a call, the worker parks the resumed segment's CLI at
the deferred call's hook; a decision inside `hot_resume_window` continues that
process, any other resumes cold. What proves which path answered: the
session's history (a resumed model Step on the worker's `.parked.` queue, or
not), the parked CLI's PID in the worker's log line that took it, and the live
processes in the session's working directory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from dex_agents.cli._app import main
from dex_agents.session._state import Interrupt
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import WorkerProcess
from support import SUPPORT_DIR, hot_agent
from support.claude_rig import ClaudeRig, worker_process
from support.history import patch_markers
from support.processes import cli_processes_in

pytestmark = pytest.mark.timeout(240)

REFUND = 'dex-script: call create_refund {"orderId": "7"}'


def _cwd(rig: ClaudeRig, sid: str) -> Path:
    return (rig.tmp / "agents" / sid).resolve()


async def _parked_pid(rig: ClaudeRig, sid: str) -> int:
    """The PID of the session's one CLI once it is parked (the deferring one ended)."""
    cwd = _cwd(rig, sid)
    async with asyncio.timeout(30):
        while len(pids := cli_processes_in(cwd)) != 1:
            await asyncio.sleep(0.05)
    return pids[0]


async def _no_cli(rig: ClaudeRig, sid: str, seconds: float = 30) -> None:
    cwd = _cwd(rig, sid)
    async with asyncio.timeout(seconds):
        while cli_processes_in(cwd):
            await asyncio.sleep(0.05)


async def _model_steps(
    client: Client, sid: str, run_id: str | None = None
) -> list[tuple[str, str, str]]:
    """Each resumed-or-not model Step of a run (the latest by default).

    As (activity ID, task queue, how it ended).
    """
    history = await client.get_workflow_handle(sid, run_id=run_id).fetch_history()
    scheduled: dict[int, tuple[str, str]] = {}
    ended: list[tuple[str, str, str]] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name.endswith(".run_model"):
                scheduled[event.event_id] = (attrs.activity_id, attrs.task_queue.name)
        endings = {
            "completed": event.activity_task_completed_event_attributes,
            "failed": event.activity_task_failed_event_attributes,
            "timed_out": event.activity_task_timed_out_event_attributes,
        }
        kind = {
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed",
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "timed_out",
        }.get(event.event_type)
        if kind is not None:
            step = scheduled.get(endings[kind].scheduled_event_id)
            if step is not None:
                ended.append((*step, kind))
    return ended


def _parked_steps(steps: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [s for s in steps if s[0].endswith("/parked")]


def _last_tool_result(rig: ClaudeRig) -> str:
    last: Any = [r.body for r in rig.api.requests if isinstance(r.body, dict)][-1]
    for message in reversed(last["messages"]):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, str):
                        return inner
                    return "".join(str(b.get("text", "")) for b in inner or [])
    raise AssertionError("the last model request holds no tool result")


@pytest.fixture
def hot_worker(
    claude_rig: ClaudeRig, engine: EmbeddedEngine
) -> Iterator[WorkerProcess]:
    """A killable worker subprocess serving `hot_agent:flow` on the rig's store."""
    with worker_process(claude_rig, engine, "hot_agent:flow", SUPPORT_DIR) as process:
        yield process


@dataclass
class _Waiting:
    """A session whose refund waits for approval."""

    sid: str
    sessions: SessionClient
    store: SQLiteRuntimeStore
    interrupt: Interrupt

    @property
    def key(self) -> str:
        return f"{self.sid}/turn-1/{self.interrupt.tool_call_id}"

    async def approve(self) -> None:
        assert await self.sessions.resolve_interrupt(
            self.sid, self.interrupt.interrupt_id, approved=True
        )

    async def refunded_once(self, client: Client) -> list[tuple[str, str, str]]:
        """Wait for the turn; it refunded once and answered once. Its model Steps."""
        snap = await self.sessions.wait_for_idle(self.sid)
        (turn,) = snap.turns
        assert turn.status == "completed", turn.error
        assert turn.final_text == "done: refunded order 7"
        assert hot_agent.refund_runs() == [("7", self.key)]
        await self.store.close()
        return await _model_steps(client, self.sid)


async def _waiting_refund(
    rig: ClaudeRig,
    client: Client,
    sid: str,
    *,
    flow: AgentSessionFlow = hot_agent.flow,
    message: str = REFUND,
) -> _Waiting:
    store = SQLiteRuntimeStore(rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    await sessions.start(sid, initial_message=message)
    waiting = await sessions.wait_for_idle(sid)
    assert waiting.pending_interrupts, waiting.turns
    return _Waiting(sid, sessions, store, waiting.pending_interrupts[0])


@asynccontextmanager
async def _parked_refund(
    rig: ClaudeRig,
    client: Client,
    sid: str,
    caplog: pytest.LogCaptureFixture,
    flow: AgentSessionFlow = hot_agent.flow,
) -> AsyncIterator[tuple[_Waiting, int, SQLiteRuntimeStore]]:
    """A worker of `flow` whose session `sid` waits on its refund, the CLI parked.

    Yields the waiting session, the parked CLI's PID and the store (closed after).
    """
    caplog.set_level(logging.INFO, logger="dex_agents.temporal.parking")
    store = SQLiteRuntimeStore(rig.tmp / "runtime.sqlite")
    try:
        async with create_worker(client, [flow], store=store):
            waiting = await _waiting_refund(rig, client, sid, flow=flow)
            yield waiting, await _parked_pid(rig, sid), store
    finally:
        await store.close()


async def test_an_approval_inside_the_window_is_answered_by_the_parked_cli(
    claude_rig: ClaudeRig,
    client: Client,
    engine: EmbeddedEngine,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A refund of half a second: the prime, sent beside its Step, lands first
    # however loaded the machine (the resumed Step is sent once the Step ended).
    monkeypatch.setenv("DEX_AGENTS_REFUND_SECONDS", "0.5")
    sid = "hot-approve-inside"
    async with _parked_refund(claude_rig, client, sid, caplog) as (
        waiting,
        parked,
        store,
    ):
        info = await waiting.sessions.engine_info(sid)
        assert info.parked_on is not None and ".parked." in info.parked_on
        target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
        shown = await asyncio.to_thread(
            CliRunner().invoke, main, ["show", sid, *target]
        )
        assert shown.exit_code == 0, shown.output
        assert f"waits parked on queue {info.parked_on}" in shown.stdout
        await waiting.approve()
        steps = await waiting.refunded_once(client)

    assert [s[2] for s in steps] == ["completed", "completed"]
    ((_, queue, _),) = _parked_steps(steps)
    assert queue == info.parked_on
    # The approval primed the park (its CLI went on with the call while the
    # refund's Step ran) before the resumed Step took it.
    primed = f"primed the parked segment of session {sid} (CLI pid {parked})"
    answered = f"answered the parked segment of session {sid} (CLI pid {parked})"
    assert primed in caplog.text and answered in caplog.text
    assert caplog.text.index(primed) < caplog.text.index(answered)


async def test_a_primed_park_whose_window_passes_is_killed_and_resumes_cold(
    claude_rig: ClaudeRig,
    client: Client,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Approved inside a 3 s window, the refund's Step takes 4 s: the park was
    # primed (its CLI past the hook, waiting for the record), the window closes
    # while the Step runs, and the resumed segment goes cold.
    flow = hot_agent.build_flow(window=3, flow_type="HotAgentPrimedLate")
    monkeypatch.setenv("DEX_AGENTS_REFUND_SECONDS", "4")
    sid = "hot-primed-late"
    async with _parked_refund(claude_rig, client, sid, caplog, flow) as (
        waiting,
        parked,
        _,
    ):
        requests = len(claude_rig.api.requests)
        await waiting.approve()
        closed = f"closed the parked segment of session {sid}: its window"
        async with asyncio.timeout(30):
            while closed not in caplog.text:
                await asyncio.sleep(0.05)
        # Killed at its close: a park closed before its prime would have had 10 s
        # to end with a deferral, which a CLI past its hook can no longer give.
        async with asyncio.timeout(5):
            while parked in cli_processes_in(_cwd(claude_rig, sid)):
                await asyncio.sleep(0.05)
        steps = await waiting.refunded_once(client)

    assert f"primed the parked segment of session {sid} (CLI pid {parked})" in (
        caplog.text
    )
    assert _parked_steps(steps) == []
    assert [s[2] for s in steps] == ["completed", "completed"]
    # One model request after the approval: the cold resume's. The primed CLI
    # never asked the model again.
    assert len(claude_rig.api.requests) == requests + 1
    # Killed on purpose: the SDK's reader does not log it as a crash.
    assert "Fatal error in message reader" not in caplog.text


async def test_a_session_continued_as_new_while_it_waits_still_takes_the_park(
    claude_rig: ClaudeRig, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    # The first run passes 10 events before its approval wait; the next, started
    # by continue-as-new while the refund waits, begins below that.
    flow = hot_agent.build_flow(
        flow_type="HotAgentContinued", continue_as_new_after_events=10
    )
    sid = "hot-approve-continued"
    async with _parked_refund(claude_rig, client, sid, caplog, flow) as (
        waiting,
        parked,
        _,
    ):
        async with asyncio.timeout(30):
            while (info := await waiting.sessions.engine_info(sid)).runs < 2:
                await asyncio.sleep(0.05)
        assert info.parked_on is not None and ".parked." in info.parked_on
        run_id = (await client.get_workflow_handle(sid).describe()).run_id
        await waiting.approve()
        await waiting.refunded_once(client)
        steps = await _model_steps(client, sid, run_id)
        continued = await client.get_workflow_handle(sid, run_id=run_id).fetch_history()

    assert "park-crosses-continue-as-new" in patch_markers(continued)
    assert [s[2] for s in steps] == ["completed"]
    ((_, queue, _),) = _parked_steps(steps)
    assert queue == info.parked_on
    assert f"answered the parked segment of session {sid} (CLI pid {parked})" in (
        caplog.text
    )


async def test_an_approval_after_the_window_resumes_cold_with_no_process_between(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = hot_agent.build_flow(window=1, flow_type="HotAgentShortWindow")
    sid = "hot-approve-after"
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    async with create_worker(client, [flow], store=store):
        waiting = await _waiting_refund(claude_rig, client, sid, flow=flow)
        await _parked_pid(claude_rig, sid)
        # The window passes: the parked CLI ends, and nothing runs while it waits.
        await _no_cli(claude_rig, sid)
        assert (await waiting.sessions.engine_info(sid)).parked_on is None
        await waiting.approve()
        steps = await waiting.refunded_once(client)
    await store.close()

    assert _parked_steps(steps) == []
    assert [s[2] for s in steps] == ["completed", "completed"]


async def test_a_rejection_while_parked_reads_as_the_cold_path_reads(
    claude_rig: ClaudeRig, client: Client
) -> None:
    hot = hot_agent.flow
    cold = hot_agent.build_flow(window=0, flow_type="HotAgentCold")
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    read: dict[str, str] = {}
    async with (
        create_worker(client, [hot], store=store),
        create_worker(client, [cold], store=store),
    ):
        for flow, sid in ((hot, "hot-reject-parked"), (cold, "hot-reject-cold")):
            sessions = SessionClient(client, flow, store)
            await sessions.start(sid, initial_message=REFUND)
            (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
            if flow is hot:
                await _parked_pid(claude_rig, sid)
            assert await sessions.resolve_interrupt(
                sid,
                interrupt.interrupt_id,
                approved=False,
                rejection_message="not for a kettle",
            )
            snap = await sessions.wait_for_idle(sid)
            assert snap.turns[0].status == "completed", snap.turns[0].error
            read[sid] = _last_tool_result(claude_rig)
            parked = _parked_steps(await _model_steps(client, sid))
            assert len(parked) == (1 if flow is hot else 0)

    assert "not for a kettle" in read["hot-reject-parked"]
    assert read["hot-reject-parked"] == read["hot-reject-cold"]
    assert hot_agent.refund_runs() == []
    await store.close()


async def test_a_bash_approval_while_parked_runs_the_approved_command_once(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = hot_agent.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "hot-bash-parked"
    ledger = claude_rig.tmp / "bash-runs.txt"
    command = {"command": f"echo ran >> {ledger}; echo appended", "description": "log"}
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message=f"dex-script: call Bash {json.dumps(command)}"
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert interrupt.tool_name == "Bash"
        await _parked_pid(claude_rig, sid)
        assert not ledger.exists()  # parked: the command has not run
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await sessions.wait_for_idle(sid)

    assert snap.turns[0].status == "completed", snap.turns[0].error
    assert ledger.read_text() == "ran\n"
    assert "appended" in snap.turns[0].final_text
    assert len(_parked_steps(await _model_steps(client, sid))) == 1
    await store.close()


async def test_a_third_deferral_beyond_max_parked_segments_resumes_cold(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = hot_agent.build_flow(max_parked=2, flow_type="HotAgentTwoParks")
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sids = ["hot-limit-a", "hot-limit-b", "hot-limit-c"]
    async with create_worker(client, [flow], store=store):
        interrupts = {}
        for sid in sids:
            await sessions.start(sid, initial_message=REFUND)
            (interrupts[sid],) = (await sessions.wait_for_idle(sid)).pending_interrupts
            if sid != sids[-1]:
                await _parked_pid(claude_rig, sid)
        await _no_cli(claude_rig, sids[-1])  # the deferring CLI ends; none parks
        assert (await sessions.engine_info(sids[-1])).parked_on is None
        for sid in sids:
            assert await sessions.resolve_interrupt(
                sid, interrupts[sid].interrupt_id, approved=True
            )
            snap = await sessions.wait_for_idle(sid)
            assert snap.turns[0].status == "completed", snap.turns[0].error

    parked = {sid: _parked_steps(await _model_steps(client, sid)) for sid in sids}
    assert [len(parked[sid]) for sid in sids] == [1, 1, 0]
    assert sorted(r[0] for r in hot_agent.refund_runs()) == ["7", "7", "7"]
    await store.close()


async def test_sigkill_of_the_worker_holding_the_park_before_the_approval(
    claude_rig: ClaudeRig, client: Client, hot_worker: WorkerProcess
) -> None:
    sid = "hot-crash-before"
    waiting = await _waiting_refund(claude_rig, client, sid)
    await _parked_pid(claude_rig, sid)
    hot_worker.kill()
    await _no_cli(claude_rig, sid, seconds=10)  # the park died with its worker
    hot_worker.start()
    await waiting.approve()
    steps = await waiting.refunded_once(client)

    # The parked Step found no worker on the dead one's queue and the cold one answered.
    assert [s[2] for s in _parked_steps(steps)] == ["timed_out"]
    assert [s[2] for s in steps if s not in _parked_steps(steps)] == [
        "completed",
        "completed",
    ]


async def test_sigkill_of_the_worker_while_the_parked_segment_continues(
    claude_rig: ClaudeRig, client: Client, hot_worker: WorkerProcess
) -> None:
    sid = "hot-crash-after"
    waiting = await _waiting_refund(
        claude_rig, client, sid, message=f"{REFUND} ;; pause final"
    )
    parked = await _parked_pid(claude_rig, sid)
    await waiting.approve()
    # The parked CLI took the record and asks the model for the turn's answer.
    await claude_rig.api.wait_paused("final", timeout=60)
    assert cli_processes_in(_cwd(claude_rig, sid)) == [parked]
    assert len(hot_agent.refund_runs()) == 1
    hot_worker.kill()
    await _no_cli(claude_rig, sid, seconds=10)
    claude_rig.api.open_gate("final")
    hot_worker.start()
    steps = await waiting.refunded_once(client)

    assert [s[2] for s in _parked_steps(steps)] == ["timed_out"]


async def test_sigkill_of_the_parked_cli_alone_resumes_cold(
    claude_rig: ClaudeRig, client: Client, hot_worker: WorkerProcess
) -> None:
    sid = "hot-crash-cli"
    waiting = await _waiting_refund(claude_rig, client, sid)
    os.kill(await _parked_pid(claude_rig, sid), signal.SIGKILL)
    await _no_cli(claude_rig, sid, seconds=10)
    await waiting.approve()
    steps = await waiting.refunded_once(client)

    # The Step reached the worker that held the park; it found it dead and ran cold.
    assert [s[2] for s in _parked_steps(steps)] == ["completed"]
    assert hot_worker.process is not None and hot_worker.process.poll() is None

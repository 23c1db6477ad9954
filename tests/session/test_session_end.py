"""Ending a session: the workflow completes, its data stays readable, and it refuses more."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Replayer

from dex_agents import SessionBusyError, SessionEndedError
from dex_agents.session._events import SessionEndedEvent
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionPlugin
from support.session_harness import Harness


async def _gate_reached(harness: Harness, gate: str) -> None:
    async with asyncio.timeout(30):
        while not (harness.gate_dir / f"{gate}.reached").exists():
            await asyncio.sleep(0.02)


async def test_an_idle_session_ends_cleanly_and_stays_readable(
    harness: Harness, client: Client, tmp_path: Path
) -> None:
    sessions = harness.sessions
    sid = harness.session_id()
    await sessions.start(sid, initial_message="say before the end")
    await sessions.wait_for_idle(sid)

    assert await sessions.end(sid, reason="done with it")

    handle = client.get_workflow_handle(sid)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    snap = await sessions.snapshot(sid)
    assert snap.status == "ended"
    assert [t.final_text for t in snap.turns] == ["said: before the end"]
    assert [t.turn_id async for t in sessions.history(sid)] == ["turn-1"]
    assert (await sessions.wait_for_idle(sid)).status == "ended"
    events = await sessions.events(sid)
    last = events[-1].payload()
    assert isinstance(last, SessionEndedEvent)
    assert last.reason == "done with it" and last.timestamp
    projected = await harness.store.get_snapshot(sid)
    assert projected is not None and projected["status"] == "ended"

    # Ending again changes nothing; messages, approvals and a restart are refused.
    assert not await sessions.end(sid)
    with pytest.raises(SessionEndedError, match="has ended"):
        await sessions.send_user_message(sid, "say are you there?")
    with pytest.raises(SessionEndedError, match="has ended"):
        await sessions.resolve_interrupt(sid, "intr_x", approved=True)
    with pytest.raises(SessionEndedError, match="choose another ID"):
        await sessions.start(sid, initial_message="say again")

    # The new exit path replays on the code that wrote it.
    history = await handle.fetch_history()
    store = SQLiteRuntimeStore(tmp_path / "replay.sqlite")
    replayer = Replayer(
        workflows=[], plugins=[SessionPlugin([harness.flow], store=store)]
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    await store.close()


async def test_work_in_progress_refuses_an_end_without_force(harness: Harness) -> None:
    sessions = harness.sessions
    sid = harness.session_id()
    await sessions.start(sid, initial_message='call create_refund {"orderId": "7"}')
    (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts

    with pytest.raises(SessionBusyError, match="waiting for approval") as raised:
        await sessions.end(sid)

    assert "force=True" in str(raised.value)
    snap = await sessions.snapshot(sid)
    assert snap.status == "waiting_for_approval"
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt.interrupt_id]


async def test_a_forced_end_rejects_pending_approvals_and_nothing_runs(
    harness: Harness,
) -> None:
    sessions = harness.sessions
    sid = harness.session_id()
    await sessions.start(sid, initial_message='call create_refund {"orderId": "7"}')
    (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts

    assert await sessions.end(sid, reason="customer left", force=True)

    snap = await sessions.snapshot(sid)
    assert snap.status == "ended" and snap.pending_interrupts == []
    (turn,) = snap.turns
    assert turn.status == "failed"
    assert turn.error == "the session ended before this turn finished: customer left"
    (record,) = turn.tool_calls
    assert record.status == "rejected"
    assert record.rejection_message == "the session ended: customer left"
    events = await sessions.events(sid)
    resolved = [e for e in events if e.type == "interrupt_resolved"]
    assert [e.data["interrupt_id"] for e in resolved] == [interrupt.interrupt_id]
    assert [e.type for e in events][-2:] == ["turn_failed", "session_ended"]
    assert harness.ledger.count("create_refund_started") == 0
    # A late approval of the rejected call is refused, not applied.
    with pytest.raises(SessionEndedError):
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)


async def test_a_forced_end_lets_the_running_tool_finish_then_stops_the_turn(
    harness: Harness,
) -> None:
    sessions = harness.sessions
    sid = harness.session_id()
    await sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "gate": "mail"}'
    )
    await _gate_reached(harness, "mail")

    before = (await sessions.snapshot(sid, turns=0)).version
    ending = asyncio.create_task(sessions.end(sid, force=True))
    # The end is applied while the tool runs (nothing else changes the state
    # then); only after it does the tool go on, and finish.
    async with asyncio.timeout(30):
        while (await sessions.snapshot(sid, turns=0)).version == before:
            await asyncio.sleep(0.02)
    assert not ending.done()
    harness.open_gate("mail")
    assert await ending

    snap = await sessions.snapshot(sid)
    (turn,) = snap.turns
    assert (turn.status, turn.error) == (
        "failed",
        "the session ended before this turn finished",
    )
    assert [r.status for r in turn.tool_calls] == ["finished"]
    assert harness.ledger.count("send_email") == 1
    # No model segment ran after the tool: the turn's only segment is its first.
    assert not [
        e
        for e in await sessions.events(sid)
        if e.step_execution_id.startswith("turn-1/run_model/2")
    ]

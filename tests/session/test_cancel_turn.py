"""`cancel_turn`: a Stop that ends the running turn wherever it is, on the dev server."""

from __future__ import annotations

import asyncio

import pytest

from dex_agents import InvalidArgumentError
from support.session_harness import Harness

pytestmark = pytest.mark.timeout(120)


async def _reached(harness: Harness, gate: str) -> None:
    async with asyncio.timeout(30):
        while not (harness.gate_dir / f"{gate}.reached").exists():
            await asyncio.sleep(0.02)


async def test_a_turn_cancelled_during_its_model_call_keeps_what_it_streamed(
    harness: Harness,
) -> None:
    sid = "cancel-during-model-call"
    await harness.sessions.start(sid, initial_message="stream 6 ;; pause held")
    await _reached(harness, "held")

    assert await harness.sessions.cancel_turn(
        sid, reason="wrong way", cancelled_by="ana"
    )

    snap = await harness.sessions.wait_for_idle(sid)
    (turn,) = snap.turns
    assert turn.status == "cancelled"
    assert turn.error == "the turn was cancelled: wrong way"
    assert turn.final_text == "t0 t1 t2 t3 "  # streamed before the gate
    events = [
        e for e in await harness.sessions.events(sid) if e.turn_id == turn.turn_id
    ]
    (cancelled,) = [e for e in events if e.type == "turn_cancelled"]
    assert cancelled.data["reason"] == "wrong way"
    assert cancelled.data["cancelled_by"] == "ana"
    assert not [e for e in events if e.type in ("turn_completed", "turn_failed")]
    # The next message starts a normal turn; the stopped prompt is not sent again,
    # and the model is told the turn was stopped.
    snap = await harness.sessions.send_and_wait(sid, "say hello")
    assert snap.turns[-1].status == "completed"
    assert snap.turns[-1].final_text == "said: hello (after 1 failure note(s))"
    snap = await harness.sessions.send_and_wait(sid, "recall")
    assert snap.turns[-1].final_text == "recalled: say hello"


async def test_a_cancel_while_an_approval_waits_closes_it_and_nothing_runs(
    harness: Harness,
) -> None:
    sid = "cancel-while-approval-waits"
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "3"}'
    )
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts

    assert await harness.sessions.cancel_turn(sid)

    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.status == "idle" and snap.pending_interrupts == []
    (turn,) = snap.turns
    assert turn.status == "cancelled"
    (record,) = turn.tool_calls
    assert (record.status, record.rejection_message) == (
        "cancelled",
        "the turn was cancelled",
    )
    assert harness.ledger.entries("create_refund_started") == []
    # The closed approval cannot be answered any more.
    assert not await harness.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    assert harness.ledger.entries("create_refund_started") == []


async def test_a_tool_step_in_flight_finishes_and_is_recorded_before_the_turn_stops(
    harness: Harness,
) -> None:
    sid = "cancel-during-tool-step"
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "4", "gate": "write"}'
    )
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    assert await harness.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    await _reached(harness, "write")

    assert await harness.sessions.cancel_turn(sid, reason="stop")
    assert (await harness.sessions.snapshot(sid)).status == "running"  # still writing
    harness.open_gate("write")

    snap = await harness.sessions.wait_for_idle(sid)
    (turn,) = snap.turns
    assert turn.status == "cancelled"
    (record,) = turn.tool_calls
    assert (record.status, record.output) == ("finished", "refunded order 4")
    assert len(harness.ledger.entries("create_refund")) == 1  # the write ran, once


async def test_cancel_with_no_turn_running_answers_false(harness: Harness) -> None:
    sid = "cancel-with-nothing-running"
    await harness.sessions.start(sid, initial_message="say hi")
    await harness.sessions.wait_for_idle(sid)

    assert not await harness.sessions.cancel_turn(sid)
    with pytest.raises(InvalidArgumentError) as caught:
        await harness.sessions.cancel_turn(sid, reason=3)  # pyright: ignore[reportArgumentType]
    assert caught.value.argument == "reason"
    snap = await harness.sessions.snapshot(sid)
    assert [t.status for t in snap.turns] == ["completed"]

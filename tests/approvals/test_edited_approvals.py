"""Approving with an edited input, and approvals that expire, on the dev server."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import InvalidArgumentError, InvalidEditError
from dex_agents.temporal import create_worker
from support.history import settled_history_length
from support.session_harness import Harness, ledger_session, waiting_interrupt

pytestmark = pytest.mark.timeout(120)


async def test_an_edited_refund_runs_once_with_the_edited_input(
    harness: Harness,
) -> None:
    sid = "edit-refund-runs-edited"
    interrupt_id = await waiting_interrupt(
        harness, sid, 'call create_refund {"orderId": "7"}'
    )

    applied = await harness.sessions.resolve_interrupt(
        sid,
        interrupt_id,
        approved=True,
        resolved_by="ana",
        edited_input={"orderId": "8"},
    )

    assert applied
    snap = await harness.sessions.wait_for_idle(sid)
    # The ledger: one refund, of the edited order, none of the model's.
    refunds = harness.ledger.entries("create_refund")
    assert [r["order_id"] for r in refunds] == ["8"]
    (record,) = snap.turns[0].tool_calls
    assert record.status == "finished"
    assert record.arguments == {"orderId": "8"}
    assert record.edit is not None
    assert record.edit.original_arguments == {"orderId": "7"}
    assert record.edit.edited_by == "ana"
    # The model read the result and a note that a person edited the input.
    assert snap.turns[0].final_text.startswith("done: create_refund=refunded order 8")
    assert "A person edited this call's input" in snap.turns[0].final_text
    events = await harness.sessions.events(sid)
    (resolved,) = [e for e in events if e.type == "interrupt_resolved"]
    assert resolved.data["edited_arguments"] == {"orderId": "8"}
    assert resolved.data["original_arguments"] == {"orderId": "7"}
    assert resolved.data["edited_by"] == "ana"
    # A repeat of the approval changes nothing.
    again = await harness.sessions.resolve_interrupt(
        sid, interrupt_id, approved=True, edited_input={"orderId": "9"}
    )
    assert not again
    assert len(harness.ledger.entries("create_refund")) == 1


async def test_an_edit_that_fails_the_schema_is_refused_and_the_call_stays_pending(
    harness: Harness,
) -> None:
    sid = "edit-refund-schema-refused"
    interrupt_id = await waiting_interrupt(
        harness, sid, 'call create_refund {"orderId": "7"}'
    )

    with pytest.raises(InvalidEditError) as caught:
        await harness.sessions.resolve_interrupt(
            sid, interrupt_id, approved=True, edited_input={"orderId": 8}
        )

    assert caught.value.field == "orderId"
    assert "orderId" in str(caught.value) and "create_refund" in str(caught.value)
    # The argument at fault is `edited_input`: a handler of bad arguments sees it too,
    # and it crosses a process whole.
    assert isinstance(caught.value, InvalidArgumentError)
    assert caught.value.argument == "edited_input"
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), again.field, again.argument, str(again)) == (
        InvalidEditError,
        "orderId",
        "edited_input",
        str(caught.value),
    )
    with pytest.raises(InvalidEditError) as missing:
        await harness.sessions.resolve_interrupt(
            sid, interrupt_id, approved=True, edited_input={"order": "8"}
        )
    assert missing.value.field == "orderId"
    snap = await harness.sessions.snapshot(sid)
    assert snap.status == "waiting_for_approval"
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt_id]
    assert not harness.ledger.entries("create_refund")
    # A good edit afterwards still applies.
    assert await harness.sessions.resolve_interrupt(
        sid, interrupt_id, approved=True, edited_input={"orderId": "9"}
    )
    await harness.sessions.wait_for_idle(sid)
    refunds = harness.ledger.entries("create_refund")
    assert [r["order_id"] for r in refunds] == ["9"]


async def test_wrong_edit_arguments_are_refused_before_anything_is_sent(
    harness: Harness,
) -> None:
    sid = "edit-refund-bad-arguments"
    interrupt_id = await waiting_interrupt(
        harness, sid, 'call create_refund {"orderId": "7"}'
    )
    before = await settled_history_length(harness.sessions.client, sid)

    for edited, approved in [
        ({"orderId": "8"}, False),
        (["orderId"], True),
        ({1: "8"}, True),
        ({"orderId": float("nan")}, True),
        ({"orderId": "\ud800"}, True),
    ]:
        with pytest.raises(InvalidArgumentError) as caught:
            await harness.sessions.resolve_interrupt(
                sid,
                interrupt_id,
                approved=approved,
                edited_input=edited,  # pyright: ignore[reportArgumentType]
            )
        assert caught.value.argument == "edited_input"

    after = await settled_history_length(harness.sessions.client, sid)
    assert after == before
    assert (await harness.sessions.snapshot(sid)).status == "waiting_for_approval"


async def test_a_long_edit_travels_by_reference_and_runs_whole(
    harness: Harness,
) -> None:
    sid = "edit-refund-long-input"
    interrupt_id = await waiting_interrupt(
        harness, sid, 'call create_refund {"orderId": "7"}'
    )
    order = "8" * 100_000

    assert await harness.sessions.resolve_interrupt(
        sid, interrupt_id, approved=True, edited_input={"orderId": order}
    )

    await harness.sessions.wait_for_idle(sid)
    refunds = harness.ledger.entries("create_refund")
    assert [r["order_id"] for r in refunds] == [order]
    handle = harness.sessions.client.get_workflow_handle(sid)
    largest = max(
        [e.ByteSize() async for e in handle.fetch_history_events()], default=0
    )
    assert largest < 32_000  # the edit never entered history whole


async def test_an_approval_that_passes_its_deadline_expires(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, interrupt_deadline_seconds=1.0
    )
    sid = "deadline-expires"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "1"}')
        snap = await sessions.wait_for_idle(sid)
        assert snap.pending_interrupts[0].deadline is not None
        async with asyncio.timeout(30):
            async for event in sessions.follow(sid):
                if event.type == "turn_completed":
                    break
        snap = await sessions.snapshot(sid)
        (record,) = snap.turns[0].tool_calls
        assert record.status == "expired"
        assert record.rejection_message == "no approval arrived before the deadline"
        events = await sessions.events(sid)
        (resolved,) = [e for e in events if e.type == "interrupt_resolved"]
        assert (resolved.data["approved"], resolved.data["expired"]) == (False, True)
        (finished,) = [e for e in events if e.type == "tool_call_finished"]
        assert finished.data["status"] == "expired"
        # The model's next request carried the expiry, not a person's refusal.
        answer = snap.turns[0].final_text
        assert "its approval expired" in answer and "rejected" not in answer
    await store.close()

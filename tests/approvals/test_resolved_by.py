"""Who approved or rejected a call travels with the resolution itself.

`resolve_interrupt(resolved_by=...)` names the one who decided; the session
records it on the interrupt, on the call's record and in the
`interrupt_resolved` event, whether a worker took the Update or the answer
was recorded (the `record_resolution` Signal) and applied when one started.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import NoWorkerError
from dex_agents.session._events import EventRecord
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import create_worker
from support.session_harness import Harness, ledger_session, waiting_interrupt

REFUND = 'call create_refund {"orderId": "8"}'


async def _resolutions(store: SQLiteRuntimeStore, sid: str) -> list[EventRecord]:
    events = await store.read_events(sid)
    return [e for e in events if e.type == "interrupt_resolved"]


async def test_an_approval_by_update_records_who_approved(harness: Harness) -> None:
    sessions = harness.sessions
    sid = f"resolved-by-update-{uuid.uuid4().hex[:8]}"
    interrupt_id = await waiting_interrupt(harness, sid, REFUND)
    (interrupt,) = (await sessions.snapshot(sid)).pending_interrupts
    assert interrupt.resolved_by is None
    changed = await sessions.resolve_interrupt(
        sid, interrupt_id, approved=True, resolved_by="alice"
    )
    assert changed
    snap = await sessions.wait_for_idle(sid, timeout=30)
    assert snap.turns[-1].final_text == "done: create_refund=refunded order 8"
    (record,) = snap.turns[-1].tool_calls
    assert (record.status, record.resolved_by) == ("finished", "alice")
    (resolved,) = await _resolutions(harness.store, sid)
    assert resolved.data["interrupt_id"] == interrupt_id
    assert (resolved.data["approved"], resolved.data["resolved_by"]) == (True, "alice")


async def test_a_recorded_rejection_with_no_worker_keeps_who_rejected(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    sid = f"resolved-by-signal-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message=REFUND)
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
    iid = interrupt.interrupt_id
    with pytest.raises(NoWorkerError) as caught:
        await sessions.resolve_interrupt(
            sid,
            iid,
            approved=False,
            rejection_message="order 8 is a duplicate",
            timeout=1,
            resolved_by="bob",
        )
    assert caught.value.recorded
    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
    (record,) = snap.turns[-1].tool_calls
    assert (record.status, record.resolved_by) == ("rejected", "bob")
    assert record.rejection_message == "order 8 is a duplicate"
    (resolved,) = await _resolutions(store, sid)
    assert (resolved.data["approved"], resolved.data["resolved_by"]) == (False, "bob")

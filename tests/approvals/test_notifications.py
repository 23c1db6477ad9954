"""`on_interrupt` with the ready webhook sender, against a real HTTP receiver."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.notify import WebhookNotifier
from dex_agents.notify._webhook import ID_HEADER
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config
from support.webhook_receiver import Receiver, receiver

pytestmark = pytest.mark.timeout(120)
__all__ = ["receiver"]  # the fixture, imported

SECRET = "ledger-webhook-secret"


async def _until(condition: Callable[[], bool], timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def _bodies(receiver: Receiver) -> list[dict[str, object]]:
    return [json.loads(r.body) for r in receiver.requests]


async def _sessions(
    client: Client, tmp_path: Path, flow_type: str, **config: object
) -> AsyncIterator[tuple[SessionClient, Ledger]]:
    cfg = ledger_config(tmp_path, flow_type, **config)
    flow = ledger_flow(cfg)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    async with create_worker(client, [flow], store=store):
        yield SessionClient(client, flow, store), Ledger(cfg.ledger_path)
    await store.close()


async def test_each_new_approval_is_posted_once_signed(
    client: Client, tmp_path: Path, flow_type: str, receiver: Receiver
) -> None:
    sid = "notify-each-approval"
    async for sessions, _ledger in _sessions(
        client, tmp_path, flow_type, webhook_url=receiver.url
    ):
        await sessions.start(sid, initial_message='call lookup_order {"orderId": "1"}')
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, 'call create_refund {"orderId": "7"}')
        (first,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        await _until(lambda: len(receiver.requests) == 1)
        assert await sessions.resolve_interrupt(sid, first.interrupt_id, approved=True)
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, 'call create_refund {"orderId": "8"}')
        (second,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        await _until(lambda: len(receiver.requests) == 2)

        # One POST per approval (none for the read), each signed with the secret.
        for request in receiver.requests:
            assert WebhookNotifier.verify_signature(
                SECRET, request.body, request.headers
            )
            assert not WebhookNotifier.verify_signature(
                "another secret", request.body, request.headers
            )
        bodies = _bodies(receiver)
        assert [b["interrupt_id"] for b in bodies] == [
            first.interrupt_id,
            second.interrupt_id,
        ]
        assert bodies[0]["kind"] == "created"
        assert bodies[0]["session_id"] == sid
        assert bodies[0]["tool_name"] == "create_refund"
        assert bodies[0]["effect"] == "non_idempotent_write"
        assert json.loads(str(bodies[0]["arguments_preview"])) == {"orderId": "7"}
        assert (
            receiver.requests[0].headers[ID_HEADER] == f"{first.interrupt_id}/created"
        )


async def test_a_receiver_that_fails_three_times_is_retried_and_the_session_goes_on(
    client: Client, tmp_path: Path, flow_type: str, receiver: Receiver
) -> None:
    sid = "notify-failing-receiver"
    receiver.failures_left = 3
    async for sessions, ledger in _sessions(
        client, tmp_path, flow_type, webhook_url=receiver.url
    ):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "5"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        # The session does not wait for the receiver: approving works meanwhile.
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "completed"
        assert len(ledger.entries("create_refund")) == 1

        await _until(lambda: len(receiver.requests) == 4)
        ids = {r.headers[ID_HEADER] for r in receiver.requests}
        assert ids == {f"{interrupt.interrupt_id}/created"}  # one notification, retried
        assert receiver.failures_left == 0


async def test_a_receiver_that_never_answers_well_never_holds_the_session(
    client: Client, tmp_path: Path, flow_type: str, receiver: Receiver
) -> None:
    sid = "notify-dead-receiver"
    receiver.failures_left = 1_000
    async for sessions, _ledger in _sessions(
        client,
        tmp_path,
        flow_type,
        webhook_url=receiver.url,
        notification_attempts=2,
    ):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "6"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        await _until(lambda: len(receiver.requests) == 2)  # its attempts, used up
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await sessions.send_and_wait(sid, "say still here")
        assert snap.turns[-1].final_text == "said: still here"
        assert len(receiver.requests) == 2


async def test_a_waiting_approval_is_reminded_then_told_it_expired(
    client: Client, tmp_path: Path, flow_type: str, receiver: Receiver
) -> None:
    sid = "notify-reminders-and-expiry"
    async for sessions, _ledger in _sessions(
        client,
        tmp_path,
        flow_type,
        webhook_url=receiver.url,
        interrupt_reminder_seconds=0.5,
        interrupt_deadline_seconds=1.8,
    ):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "9"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert interrupt.deadline is not None
        await _until(lambda: any(b["kind"] == "expired" for b in _bodies(receiver)))
        snap = await sessions.wait_for_idle(sid)
        assert [r.status for r in snap.turns[0].tool_calls] == ["expired"]
        # Every notification the session asked for arrives (each is a Step of its
        # own, so in any order): as many as its history scheduled.
        asked = await _notifications_scheduled(sessions, sid)
        await _until(lambda n=asked: len(receiver.requests) == n)

        # Ordered as the session made them: by time, then (timers that fired late
        # in one activation share a time) by kind and reminder number.
        sent = sorted(_bodies(receiver), key=_made_order)
        kinds = [(b["kind"], b["reminder"]) for b in sent]
        # Reminders every 0.5 s until the deadline at 1.8 s: at least one (timers
        # may fire late on a loaded machine, never early), numbered from 1.
        reminders = len(kinds) - 2
        assert 1 <= reminders <= 3
        assert kinds == [
            ("created", 0),
            *(("reminder", n) for n in range(1, reminders + 1)),
            ("expired", 0),
        ]
        ids = [r.headers[ID_HEADER] for r in receiver.requests]
        assert len(set(ids)) == len(ids)


def _made_order(body: dict[str, object]) -> tuple[str, int, int]:
    reminder = body["reminder"]
    assert isinstance(reminder, int)
    rank = {"created": 0, "reminder": 1, "expired": 2}[str(body["kind"])]
    return (str(body["sent_at"]), rank, reminder)


async def _notifications_scheduled(sessions: SessionClient, sid: str) -> int:
    """How many notification Steps the session's history scheduled."""
    handle = sessions.client.get_workflow_handle(sid)
    names = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    return sum(name.endswith(".notify_interrupt") for name in names)

"""Continue-as-new loses nothing: not a pending approval, not an Update in flight."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Replayer

from dex_agents.temporal import SessionPlugin, create_worker
from dex_agents.testing import Ledger
from support.history import patch_markers
from support.session_harness import ledger_session
from support.webhook_receiver import Receiver, receiver

__all__ = ["receiver"]  # the fixture, imported


async def _runs(client: Client, session_id: str) -> int:
    return len([w async for w in client.list_workflows(f"WorkflowId = '{session_id}'")])


async def test_pending_approval_survives_continue_as_new(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, continue_as_new_after_events=12
    )
    sid = "can-approval"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say warm up")
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, 'call create_refund {"orderId": "4"}')
        snap = await sessions.wait_for_idle(sid)
        (interrupt,) = snap.pending_interrupts
        # Run 1 held the warm-up turn; run 2 asked for approval and, its history past
        # the limit, continued as new while waiting; run 3 waits on.
        async with asyncio.timeout(30):
            while await _runs(client, sid) < 3:
                await asyncio.sleep(0.05)
        current = await client.get_workflow_handle(sid).describe()
        runs = [w async for w in client.list_workflows(f"WorkflowId = '{sid}'")]
        continued = next(
            w
            for w in runs
            if w.status == WorkflowExecutionStatus.CONTINUED_AS_NEW
            and w.history_length >= 12
        )
        # Run 3 began from the carried state, not from run 2's events (a loaded
        # machine may add a timed-out workflow task to it, so no fixed count).
        assert current.raw_description.workflow_execution_info.history_length < (
            continued.history_length
        )
        after = await sessions.snapshot(sid)
        assert [i.interrupt_id for i in after.pending_interrupts] == [
            interrupt.interrupt_id
        ]
        assert after.status == "waiting_for_approval"
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await sessions.wait_for_idle(sid)
    await store.close()
    assert snap.turns[1].final_text == "done: create_refund=refunded order 4"
    assert Ledger(config.ledger_path).count("create_refund") == 1
    assert [t.final_text for t in snap.turns][0] == "said: warm up"


async def test_concurrent_updates_across_continue_as_new_are_delivered_once(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, continue_as_new_after_events=40
    )
    sid = "can-updates"
    texts = [f"say message {n:02d}" for n in range(30)]
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid)
        results = await asyncio.gather(
            *(sessions.send_user_message(sid, t) for t in texts)
        )
        assert all(results)
        async with asyncio.timeout(60):
            while True:
                snap = await sessions.wait_for_idle(sid)
                sent = [p for t in snap.turns for p in t.prompts]
                if len(sent) >= len(texts) and snap.status == "idle":
                    break
    await store.close()
    assert sorted(sent) == sorted(texts)
    assert await _runs(client, sid) >= 2


async def _pending_notifications(client: Client, session_id: str) -> int:
    raw = (await client.get_workflow_handle(session_id).describe()).raw_description
    return sum(a.activity_id.startswith("notify/") for a in raw.pending_activities)


@pytest.mark.timeout(150)
async def test_a_message_while_continue_as_new_waits_on_a_notification_gets_its_turn(
    client: Client, tmp_path: Path, flow_type: str, receiver: Receiver
) -> None:
    # The approval's webhook receiver is down: its notification Step retries on,
    # and the session, idle with its history past the limit, waits for it
    # before it continues as new. A message sent meanwhile must get its turn.
    receiver.failures_left = 10**6
    config, flow, store, sessions = ledger_session(
        client,
        tmp_path,
        flow_type,
        continue_as_new_after_events=30,  # past it by the turn's end, not before
        webhook_url=receiver.url,
        notification_attempts=100,
    )
    sid = "can-waits-on-a-notification"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "4"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        assert (await sessions.wait_for_idle(sid)).status == "idle"
        handle = client.get_workflow_handle(sid)
        first_run = (await handle.describe()).run_id
        info = (await handle.describe()).raw_description.workflow_execution_info
        assert info.history_length >= 30
        assert await _pending_notifications(client, sid) == 1

        async with asyncio.timeout(30):
            snap = await sessions.send_and_wait(sid, "say while it waits")
            assert await sessions.send_user_message(sid, "say and again")
            again = await sessions.wait_for_idle(sid)
        assert snap.turns[-1].final_text == "said: while it waits"
        assert again.turns[-1].final_text == "said: and again"
        assert again.status == "idle"
        # Both turns ran in the first run, while the notification still retried.
        assert (await handle.describe()).run_id == first_run
        assert await _pending_notifications(client, sid) == 1
        history = await handle.fetch_history()
        assert "work-before-continue-as-new" in patch_markers(history)

        # Once the receiver answers, the session continues as new after all.
        receiver.failures_left = 0
        async with asyncio.timeout(100):
            while await _runs(client, sid) < 2:
                await asyncio.sleep(0.2)
        after = await sessions.snapshot(sid)
    # The first run, the patch's marker in it, replays on this code.
    replayer = Replayer(workflows=[], plugins=[SessionPlugin([flow], store=store)])
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert replayed.replay_failure is None
    await store.close()
    assert after.status == "idle"
    assert [t.final_text for t in after.turns][-2:] == [
        "said: while it waits",
        "said: and again",
    ]
    assert Ledger(config.ledger_path).count("create_refund") == 1

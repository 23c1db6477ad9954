"""A client's retry of an Update the session applied before it continued as new.

Temporal dedupes an Update ID only within one run; the session carries the IDs
it applied (`SessionState.update_ids`) through continue-as-new, so a retry that
reaches a later run is answered by its handler with what the first one
applied. Its validator must let it through, whatever it would refuse now.
Each test sends the retry with the raw handle, with the first one's Update ID,
as `SessionClient` does when its call is sent again.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client

from dex_agents.session._pending import MAX_QUEUED_MESSAGES
from dex_agents.temporal import create_worker
from dex_agents.temporal._models import ResolveInterruptInput, UserMessageInput
from dex_agents.testing import Ledger
from support.session_harness import ledger_session


async def _run_after(client: Client, session_id: str, run_id: str) -> str:
    """The session's current run, once it is not `run_id` (it continued as new)."""
    handle = client.get_workflow_handle(session_id)
    async with asyncio.timeout(30):
        while (current := (await handle.describe()).run_id) == run_id:
            await asyncio.sleep(0.05)
    return current


async def test_an_expired_retry_of_an_applied_resolution_is_answered_not_refused(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, continue_as_new_after_events=30
    )
    sid = f"retry-resolution-{uuid.uuid4().hex[:6]}"
    handle = client.get_workflow_handle(sid)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "5"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        first_run = (await handle.describe()).run_id
        expires = datetime.now(UTC) + timedelta(seconds=2)
        resolution = ResolveInterruptInput(
            interrupt_id=interrupt.interrupt_id,
            approved=True,
            expires_at=expires.isoformat(),
        )
        update_id = str(uuid.uuid4())
        assert await handle.execute_update(
            "resolve_interrupt", resolution, id=update_id, result_type=bool
        )
        # The approved turn ends and, its history past the limit, the idle
        # session continues as new; by then the request's `expires_at` passed.
        await _run_after(client, sid, first_run)
        before = await sessions.snapshot(sid)
        async with asyncio.timeout(30):
            while datetime.now(UTC) <= expires:
                await asyncio.sleep(0.05)

        # The client's retry: the same request, the same Update ID.
        assert await handle.execute_update(
            "resolve_interrupt", resolution, id=update_id, result_type=bool
        )
        after = await sessions.snapshot(sid)
    await store.close()
    assert after.version == before.version  # nothing applied again
    assert after.status == "idle"
    assert [t.final_text for t in after.turns] == [
        "done: create_refund=refunded order 5"
    ]
    assert Ledger(config.ledger_path).count("create_refund") == 1


async def test_a_retry_of_a_queued_message_is_answered_when_the_queue_is_full(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    # The session waits for an approval, so messages queue behind it; its
    # history passes the limit as they arrive, and it continues as new.
    _config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, continue_as_new_after_events=60
    )
    sid = f"retry-message-{uuid.uuid4().hex[:6]}"
    handle = client.get_workflow_handle(sid)
    first = UserMessageInput(text="say queued first")
    update_id = str(uuid.uuid4())
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "6"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        first_run = (await handle.describe()).run_id
        assert await handle.execute_update(
            "send_user_message", first, id=update_id, result_type=bool
        )
        # The turn's own prompt counts: the first, these, and the queue is full.
        others = [f"say queued {n:03d}" for n in range(MAX_QUEUED_MESSAGES - 2)]
        for start in range(0, len(others), 20):
            assert all(
                await asyncio.gather(
                    *(sessions.send_user_message(sid, t) for t in others[start:][:20])
                )
            )
        await _run_after(client, sid, first_run)
        before = await sessions.snapshot(sid)
        assert before.status == "waiting_for_approval"
        assert len(before.pending_prompts) == MAX_QUEUED_MESSAGES  # full
        assert before.queued_prompts is not None

        # The client's retry of the first message, in a later run: answered True.
        assert await handle.execute_update(
            "send_user_message", first, id=update_id, result_type=bool
        )
        after = await sessions.snapshot(sid)
        assert after.version == before.version  # nothing queued again
        assert after.pending_prompts == before.pending_prompts
        assert after.pending_prompts.count("say queued first") == 1

        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        done = await sessions.wait_for_idle(sid)
    await store.close()
    sent = [p for t in done.turns for p in t.prompts]
    assert sent.count("say queued first") == 1
    assert len(sent) == MAX_QUEUED_MESSAGES

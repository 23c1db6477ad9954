"""A zero `timeout=` with a worker running is not "no worker".

A worker that polls takes an Update within milliseconds, but not within none:
`wait_for_idle(timeout=0)` on a busy session raised `NoWorkerError` instead of
`IdleTimeoutError`, and `resolve_interrupt(timeout=0)` recorded a Signal and
said no worker ran. Every request now gives the worker `_TAKE_FLOOR` to take it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import IdleTimeoutError
from dex_agents.temporal import create_worker
from support.session_harness import ledger_session


async def test_zero_timeouts_reach_the_running_worker(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    sid = f"zero-timeout-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say hi ;; pause slow-turn")
        with pytest.raises(IdleTimeoutError) as busy:
            await sessions.wait_for_idle(sid, timeout=0)
        assert busy.value.session_id == sid
        (tmp_path / "gates" / "slow-turn").write_text("")
        assert (await sessions.wait_for_idle(sid, timeout=30)).status == "idle"

        await sessions.send_user_message(sid, 'call create_refund {"orderId": "5"}')
        (interrupt,) = (
            await sessions.wait_for_idle(sid, timeout=30)
        ).pending_interrupts
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True, timeout=0
        )
        assert (await sessions.wait_for_idle(sid, timeout=30)).status == "idle"
    history = [e async for e in client.get_workflow_handle(sid).fetch_history_events()]
    assert not any(
        e.HasField("workflow_execution_signaled_event_attributes") for e in history
    ), "taken by the worker, not recorded for a later one"
    await store.close()

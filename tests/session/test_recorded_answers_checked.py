"""With no worker, an answer the session would refuse is refused, not recorded.

A resolution no worker takes in time is recorded as a Signal, which the
session cannot refuse: an interrupt ID it never had, or a spend-limit approval
without a limit above what was spent, was reported "recorded; applies when a
worker starts" and then only logged as ignored. The client checks the store's
projection first, with the session's own rule, and records nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import InvalidArgumentError, NoWorkerError, UnknownInterruptError
from support.session_harness import (
    approval_without_worker,
    budget_paused_without_worker,
)


async def _signals(client: Client, sid: str) -> int:
    history = [e async for e in client.get_workflow_handle(sid).fetch_history_events()]
    return sum(
        e.HasField("workflow_execution_signaled_event_attributes") for e in history
    )


async def test_an_unknown_interrupt_with_no_worker_is_refused_not_recorded(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    paused = await approval_without_worker(
        client, tmp_path, flow_type, "no-worker-typo", order_id="5"
    )
    sid, sessions = paused.sid, paused.sessions
    with pytest.raises(UnknownInterruptError) as caught:
        await sessions.resolve_interrupt(sid, "intr_typo", approved=True, timeout=1)
    assert caught.value.interrupt_id == "intr_typo"
    assert f"session {sid!r} has no interrupt 'intr_typo'" in str(caught.value)
    # A tool call's approval takes no spend limit: refused as the Update would.
    with pytest.raises(InvalidArgumentError) as limit:
        await sessions.resolve_interrupt(
            sid, paused.interrupt_id, approved=True, new_spend_limit=5, timeout=0.5
        )
    assert limit.value.argument == "new_spend_limit"
    assert "not a budget" in str(limit.value)
    assert await _signals(client, sid) == 0, "nothing recorded"
    # The real interrupt is still recorded as before.
    with pytest.raises(NoWorkerError) as recorded:
        await sessions.resolve_interrupt(
            sid, paused.interrupt_id, approved=True, timeout=0.5
        )
    assert recorded.value.recorded
    assert await _signals(client, sid) == 1
    await paused.store.close()


async def test_a_spend_limit_approval_the_session_would_refuse_is_not_recorded(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    paused = await budget_paused_without_worker(
        client, tmp_path, flow_type, "no-worker-limit"
    )
    sid, iid, sessions = paused.sid, paused.interrupt_id, paused.sessions
    with pytest.raises(InvalidArgumentError) as missing:
        await sessions.resolve_interrupt(sid, iid, approved=True, timeout=0.5)
    assert missing.value.argument == "new_spend_limit"
    assert "approve it with `new_spend_limit` above the 0.0020 USD spent" in str(
        missing.value
    )
    with pytest.raises(InvalidArgumentError) as below:
        await sessions.resolve_interrupt(
            sid, iid, approved=True, new_spend_limit=0.001, timeout=0.5
        )
    assert "(got 0.001)" in str(below.value)
    assert await _signals(client, sid) == 0, "nothing recorded"
    with pytest.raises(NoWorkerError) as recorded:
        await sessions.resolve_interrupt(
            sid, iid, approved=True, new_spend_limit=0.01, timeout=0.5
        )
    assert recorded.value.recorded
    await paused.store.close()

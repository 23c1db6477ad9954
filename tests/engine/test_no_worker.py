"""With no worker running: typed outcomes with a timeout, a resolution that still applies once.

Temporal hands an Update to a worker only, and keeps it in the server's memory
until one takes it. `resolve_interrupt(timeout=...)` then records the resolution
in the session's history (a Signal) and raises `NoWorkerError(recorded=True)`;
`wait_for_idle(timeout=...)` raises `NoWorkerError(recorded=False)`.
"""

from __future__ import annotations

import asyncio
import pickle
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import IdleTimeoutError, NoWorkerError
from dex_agents.session._state import SessionInput
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.gates import gate_reached, open_gate
from support.session_harness import (
    approval_without_worker,
    ledger_config,
    ledger_session,
)


async def test_a_resolution_with_no_worker_is_recorded_and_applies_once(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow, store, sessions, ledger, sid, iid = await approval_without_worker(
        client, tmp_path, flow_type, "no-worker", order_id="5"
    )

    # Without `timeout=`, the Update waits for a worker; the caller's own deadline
    # cancels it as any await (temporalio alone raises its own error instead).
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1):
            await sessions.resolve_interrupt(sid, iid, approved=True)
    # The worker is gone: each resolution waits its timeout, then is recorded.
    with pytest.raises(NoWorkerError) as caught:
        await sessions.resolve_interrupt(sid, iid, approved=True, timeout=1)
    err = caught.value
    assert err.recorded and err.session_id == sid and err.timeout == 1
    assert f"the approval of interrupt {iid!r} of session {sid!r}" in str(err)
    assert "recorded in the session's history" in str(err)
    assert pickle.loads(pickle.dumps(err)).recorded
    # A repeat is recorded already; an answer of the other way would not apply
    # (the first recorded one does), so it is not recorded.
    with pytest.raises(NoWorkerError) as repeated:
        await sessions.resolve_interrupt(sid, iid, approved=True, timeout=0)
    assert repeated.value.recorded and repeated.value.superseded is None
    with pytest.raises(NoWorkerError) as rejected:
        await sessions.resolve_interrupt(
            sid, iid, approved=False, rejection_message="no", timeout=0.5
        )
    assert not rejected.value.recorded
    assert rejected.value.superseded == "an approval"
    assert "the rejection of interrupt" in str(rejected.value)
    assert "an approval is already recorded for it and applies first" in str(
        rejected.value
    )
    assert pickle.loads(pickle.dumps(rejected.value)).superseded == "an approval"
    history = [e async for e in client.get_workflow_handle(sid).fetch_history_events()]
    signals = [
        e for e in history if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert len(signals) == 1, "one recorded resolution, however often it was sent"
    assert ledger.count("create_refund_started") == 0

    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert snap.status == "idle"
        assert snap.turns[-1].final_text == "done: create_refund=refunded order 5"
        # The Update, once a worker takes it, finds the call resolved.
        assert not await sessions.resolve_interrupt(sid, iid, approved=True, timeout=10)
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["5"]
    assert ledger.count("create_refund_started") == 1
    await store.close()


async def test_waiting_with_no_worker_raises_or_stays_cancellable(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    # A session that no worker has taken yet: neither a Query nor the store answers.
    sid = f"no-worker-wait-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(
        flow.flow_type, SessionInput(), id=sid, task_queue=flow.task_queue
    )

    with pytest.raises(NoWorkerError) as caught:
        await sessions.wait_for_idle(sid, timeout=1.5)
    assert not caught.value.recorded
    assert "nothing was recorded" in str(caught.value)
    # Without `timeout=`, it waits; a caller's own deadline, past the Query's 5 s,
    # cancels the Update: a plain TimeoutError, not temporalio's
    # `WorkflowUpdateRPCTimeoutOrCancelledError`.
    with pytest.raises(TimeoutError) as cancelled:
        async with asyncio.timeout(7):
            await sessions.wait_for_idle(sid)
    assert not isinstance(cancelled.value, IdleTimeoutError)

    # A worker takes it: a turn that outlives the timeout is IdleTimeoutError.
    async with create_worker(client, [flow], store=store):
        assert (await sessions.wait_for_idle(sid, timeout=30)).status == "idle"
        await sessions.send_user_message(sid, "say hi ;; pause slow-turn")
        with pytest.raises(IdleTimeoutError) as slow:
            await sessions.wait_for_idle(sid, timeout=1)
        assert isinstance(slow.value, TimeoutError)
        assert pickle.loads(pickle.dumps(slow.value)).timeout == 1
        (tmp_path / "gates" / "slow-turn").write_text("")
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert snap.turns[-1].final_text == "said: hi"
    await store.close()


async def test_an_edit_and_a_cancel_no_worker_took_never_apply_later(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """ "Nothing was recorded" stays true: the server's copy expires.

    Temporal keeps an Update no worker took in the server's memory and hands it
    to the next worker. An edited approval and a cancel are not recorded for
    later, so they carry `expires_at`, and the next worker refuses them.
    """
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    ledger = Ledger(config.ledger_path)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    waiting, running = (f"expiry-{k}-{uuid.uuid4().hex[:8]}" for k in "wr")
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            waiting, initial_message='call create_refund {"orderId": "5"}'
        )
        (interrupt,) = (await sessions.wait_for_idle(waiting)).pending_interrupts
        await sessions.start(running, initial_message="say hi ;; pause held")
        await gate_reached(Path(config.gate_dir), "held", 30)

    with pytest.raises(NoWorkerError) as edit:
        await sessions.resolve_interrupt(
            waiting,
            interrupt.interrupt_id,
            approved=True,
            edited_input={"orderId": "9"},
            timeout=1,
        )
    assert not edit.value.recorded
    assert "nothing was recorded" in str(edit.value)
    with pytest.raises(NoWorkerError) as cancel:
        await sessions.cancel_turn(running, reason="stop", timeout=1)
    assert not cancel.value.recorded

    async with create_worker(client, [flow], store=store):
        open_gate(Path(config.gate_dir), "held")
        done = await sessions.wait_for_idle(running, timeout=30)
        assert done.turns[-1].status == "completed", "the expired cancel applied"
        assert done.turns[-1].final_text == "said: hi"
        still = await sessions.wait_for_idle(waiting, timeout=30)
        assert [i.interrupt_id for i in still.pending_interrupts] == [
            interrupt.interrupt_id
        ], "the expired edit applied"
        assert ledger.count("create_refund_started") == 0
        # Sent again with a worker running, the edit applies.
        assert await sessions.resolve_interrupt(
            waiting,
            interrupt.interrupt_id,
            approved=True,
            edited_input={"orderId": "9"},
            timeout=30,
        )
        await sessions.wait_for_idle(waiting, timeout=30)
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["9"]
    await store.close()


async def test_a_caller_s_deadline_on_a_send_with_no_worker_is_a_timeout_error(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """As any await: not temporalio's `WorkflowUpdateRPCTimeoutOrCancelledError`."""
    config, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    sid = f"no-worker-send-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(
        flow.flow_type, SessionInput(), id=sid, task_queue=flow.task_queue
    )
    sends = {
        "send_user_message": lambda: sessions.send_user_message(sid, "say one"),
        "send_and_wait": lambda: sessions.send_and_wait(sid, "say two"),
        "start": lambda: sessions.start(f"{sid}-new", initial_message="say three"),
    }
    for name, send in sends.items():
        with pytest.raises(TimeoutError) as caught:
            async with asyncio.timeout(1):
                await send()
        assert type(caught.value) is TimeoutError, name
    await store.close()


async def test_a_snapshot_with_no_worker_serving_reads_the_store_without_waiting(
    client: Client, tmp_path: Path, flow_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker polls the session's queue: the projection answers, not the Query's deadline.

    A Query no worker takes waits its whole deadline; a web page or `show` of a
    session whose workers were stopped took 5 s a read. The deadline is an hour
    here (Temporal's server gives up on such a Query after about 30 s), so only
    the worker check answers within the test's 15 s.
    """
    flow, store, sessions, _, sid, iid = await approval_without_worker(
        client, tmp_path, flow_type, "no-worker-read", order_id="8"
    )
    monkeypatch.setattr("dex_agents.temporal._client._QUERY_LIMIT", 3600.0)
    # Temporal lists a stopped worker's poller for a minute; count it stopped.
    monkeypatch.setattr("dex_agents.temporal._pollers.POLLER_FRESHNESS", timedelta(0))
    async with asyncio.timeout(15):
        snapshot = await sessions.snapshot(sid)
    assert snapshot.status == "waiting_for_approval"
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [iid]
    assert snapshot.turns[-1].status == "waiting_for_approval"

    # A worker serves it again: the answer is the workflow's own, at once.
    monkeypatch.undo()
    async with create_worker(client, [flow], store=store):
        await sessions.resolve_interrupt(sid, iid, approved=True)
        snapshot = await sessions.wait_for_idle(sid)
    assert snapshot.status == "idle"
    await store.close()

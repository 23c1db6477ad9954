"""`send_and_wait`: a message and its turn's answer in one Update.

What each test reads back comes from the server (the session's history) or
the store, never from the client's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from dex_agents import UserError
from dex_agents.session._usage import Usage
from dex_agents.temporal import SessionClient
from dex_agents.temporal._models import SessionInput, UserMessageInput
from dex_agents.temporal._snapshot import AgentSnapshot
from support.session_harness import Harness


async def _update_names(client: Client, session_id: str) -> list[str]:
    """The names of the Updates the session's history accepted, in order."""
    history = await client.get_workflow_handle(session_id).fetch_history()
    return [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]


async def test_send_and_wait_answers_the_turn_in_one_update(
    harness: Harness, client: Client
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid)
    snap = await harness.sessions.send_and_wait(sid, "say one round trip")
    assert snap.status == "idle"
    assert [t.final_text for t in snap.turns] == ["said: one round trip"]
    assert [(m.role, m.text) for m in snap.messages] == [
        ("user", "say one round trip"),
        ("assistant", "said: one round trip"),
    ]
    again = await harness.sessions.send_and_wait(sid, "say twice")
    assert [t.final_text for t in again.turns] == [
        "said: one round trip",
        "said: twice",
    ]
    # `describe` starts the session; each turn after it is one Update, nothing else.
    assert await _update_names(client, sid) == [
        "describe",
        "send_and_wait",
        "send_and_wait",
    ]


async def test_send_and_wait_returns_when_the_turn_waits_for_approval(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid)
    snap = await harness.sessions.send_and_wait(
        sid, 'call create_refund {"orderId": "31"}'
    )
    assert snap.status == "waiting_for_approval"
    (interrupt,) = snap.pending_interrupts
    assert interrupt.tool_name == "create_refund"
    assert harness.ledger.entries("create_refund") == []
    await harness.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    done = await harness.sessions.wait_for_idle(sid)
    assert done.turns[-1].final_text == "done: create_refund=refunded order 31"
    assert len(harness.ledger.entries("create_refund")) == 1


async def test_a_message_sent_during_a_turn_waits_for_its_own_turn(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid)
    first = asyncio.create_task(
        harness.sessions.send_and_wait(sid, "say first ;; pause saw1")
    )
    reached = harness.gate_dir / "saw1.reached"
    async with asyncio.timeout(30):
        while not reached.exists():
            await asyncio.sleep(0.02)
    second = asyncio.create_task(harness.sessions.send_and_wait(sid, "say second"))
    async with asyncio.timeout(30):
        while (
            "say second" not in (await harness.sessions.snapshot(sid)).pending_prompts
        ):
            await asyncio.sleep(0.02)
    # Both messages are in: the second is queued behind the paused turn.
    assert not first.done() and not second.done()
    harness.open_gate("saw1")
    first_snap, second_snap = await asyncio.gather(first, second)
    # The live part is the workflow's at the moment each call was answered.
    assert first_snap.turn_count >= 1 and "said: first" in [
        t.final_text for t in first_snap.turns
    ]
    assert second_snap.turn_count == 2 and second_snap.status == "idle"
    assert [t.final_text for t in second_snap.turns] == ["said: first", "said: second"]


async def test_a_message_queued_behind_an_approval_answers_at_once(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "33"}'
    )
    waiting = await harness.sessions.wait_for_idle(sid)
    (interrupt,) = waiting.pending_interrupts
    # The session waits for a person: the call says so instead of waiting with it.
    snap = await harness.sessions.send_and_wait(sid, "say after the refund")
    assert snap.status == "waiting_for_approval"
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt.interrupt_id]
    assert "say after the refund" in (snap.queued_prompts or [])
    await harness.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    async with asyncio.timeout(30):
        while (done := await harness.sessions.wait_for_idle(sid)).turn_count < 2:
            await asyncio.sleep(0.05)
    assert done.turns[-1].final_text == "said: after the refund"


async def test_send_and_wait_refuses_bad_input_with_the_library_error(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid)
    with pytest.raises(UserError, match="empty"):
        await harness.sessions.send_and_wait(sid, "")
    snap = await harness.sessions.snapshot(sid)
    assert snap.turns == [] and snap.status == "idle"


@workflow.defn(name="SendAndWaitOldRelease", sandboxed=False)
class _OldRelease:
    """A worker of a release before `send_and_wait`: only the two older Updates."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.answered = 0

    @workflow.run
    async def run(self, input: SessionInput) -> None:
        del input
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def send_user_message(self, input: UserMessageInput) -> bool:
        self.prompts.append(input.text)
        return True

    @workflow.update
    async def idle_snapshot(self) -> AgentSnapshot:
        return self._snapshot()

    @workflow.query
    def get_agent_snapshot(self) -> AgentSnapshot:
        return self._snapshot()

    def _snapshot(self) -> AgentSnapshot:
        return AgentSnapshot(
            session_id=workflow.info().workflow_id,
            flow_type="SendAndWaitOldRelease",
            status="idle",
            turns=[],
            pending_interrupts=[],
            usage=Usage(),
            version=len(self.prompts),
        )


async def test_an_older_worker_gets_the_two_calls_instead(
    client: Client, harness: Harness
) -> None:
    queue = f"old-release-{uuid.uuid4().hex[:8]}"
    sid = f"send-and-wait-old-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[_OldRelease]):
        handle = await client.start_workflow(
            "SendAndWaitOldRelease", SessionInput(), id=sid, task_queue=queue
        )
        sessions = SessionClient(client, harness.flow, harness.store)
        snap = await sessions.send_and_wait(sid, "say to an old worker")
        assert snap.status == "idle" and snap.version == 1
        # The failed `send_and_wait` left no trace; the idle session was queried.
        assert await _update_names(client, sid) == ["send_user_message"]
        await handle.terminate()

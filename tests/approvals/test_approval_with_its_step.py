"""An approved call's events travel with its tool Step, not in a publish before it.

The approval (`interrupt_resolved`) used to be written by a publish local
activity that held the Update's workflow task open before the tool Step could
be scheduled; now the Step carries it and writes it before the call runs, so
the events stay in order and the Step starts a round trip sooner.
"""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from support.session_harness import Harness, waiting_interrupt

REFUND = 'call create_refund {"orderId": "8"}'


async def test_an_approved_calls_events_are_written_by_its_tool_step(
    client: Client, harness: Harness
) -> None:
    sid = f"approval-with-step-{uuid.uuid4().hex[:8]}"
    interrupt_id = await waiting_interrupt(harness, sid, REFUND)
    assert await harness.sessions.resolve_interrupt(sid, interrupt_id, approved=True)
    snap = await harness.sessions.wait_for_idle(sid, timeout=30)
    assert snap.turns[-1].final_text == "done: create_refund=refunded order 8"

    # No local activity (a publish) between the approval's Update and its Step.
    history = await client.get_workflow_handle(sid).fetch_history()
    kinds: list[str] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            name = event.workflow_execution_update_accepted_event_attributes
            kinds.append(f"update:{name.accepted_request.input.name}")
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            kinds.append(f"marker:{event.marker_recorded_event_attributes.marker_name}")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            kinds.append(f"step:{attrs.activity_type.name.rsplit('.', 1)[1]}")
    approval = kinds.index("update:resolve_interrupt")
    after = kinds[approval + 1 :]
    assert after[0] == "step:call_single_attempt_tool", kinds

    # The Step wrote the approval, once, before the call's own events.
    types = [e.type for e in await harness.store.read_events(sid)]
    assert types.count("interrupt_resolved") == 1
    assert types.index("interrupt_resolved") < types.index("tool_call_started")
    (record,) = snap.turns[-1].tool_calls
    assert record.status == "finished"

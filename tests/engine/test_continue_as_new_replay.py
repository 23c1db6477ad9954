"""Histories of a message that arrived while an idle session waited to continue as new.

The session's history passed its limit after an approved turn, and the
approval's notification still retried (its receiver down), so the run waited
for it before continuing as new; a message came meanwhile. Before the
`work-before-continue-as-new` patch the run went on waiting (the message's
turn ran in the next run); with it, the turn runs at once. Both kinds replay
on the current code: `DEX_AGENTS_RECORD_HISTORIES=<label>` writes the first
run's history to `tests/histories/continue_as_new/`, every recorded one keeps
replaying, and a fresh one is replayed each run.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, SessionPlugin, create_worker
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing._ledger_flow import ledger_flow
from support.history import patch_markers
from support.session_harness import ledger_config
from support.webhook_receiver import Receiver, receiver

pytestmark = pytest.mark.timeout(150)
__all__ = ["receiver"]  # the fixture, imported

RECORDED = Path(__file__).parents[1] / "histories" / "continue_as_new"
FLOW_TYPE = "ContinueAsNewReplayFlow"
PATCH = "work-before-continue-as-new"
_LABEL = os.environ.get("DEX_AGENTS_RECORD_HISTORIES", "")


def _flow(tmp_path: Path, webhook_url: str) -> AgentSessionFlow:
    # A history replays on the options it was recorded with (the replayer runs
    # no activity, so any webhook URL does).
    return ledger_flow(
        ledger_config(
            tmp_path,
            FLOW_TYPE,
            continue_as_new_after_events=30,
            webhook_url=webhook_url,
            notification_attempts=100,
        )
    )


async def _first_run(
    client: Client, tmp_path: Path, receiver: Receiver
) -> WorkflowHistory:
    """The scenario on the current code: its first run's history, to its continue-as-new."""
    receiver.failures_left = 10**6
    flow = _flow(tmp_path, receiver.url)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = f"can-replay-{os.getpid()}-{os.urandom(3).hex()}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "4"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        await sessions.wait_for_idle(sid)
        first = await client.get_workflow_handle(sid).describe()
        assert first.raw_description.workflow_execution_info.history_length >= 30
        assert [
            a.activity_id[:7] for a in first.raw_description.pending_activities
        ] == ["notify/"]
        # A message while the run waits on the notification (a send, not a
        # `send_and_wait`, which waited forever before the patch).
        assert await sessions.send_user_message(sid, "say while it waits")
        receiver.failures_left = 0
        async with asyncio.timeout(100):
            while (await sessions.engine_info(sid)).runs < 2:
                await asyncio.sleep(0.2)
        assert (await sessions.wait_for_idle(sid)).status == "idle"
        history = await client.get_workflow_handle(
            sid, run_id=first.run_id
        ).fetch_history()
    await store.close()
    return history


async def _replays(history: WorkflowHistory, tmp_path: Path) -> None:
    flow = _flow(tmp_path, "http://127.0.0.1:9/replay-only")  # makes `tmp_path`
    store = SQLiteRuntimeStore(tmp_path / "replay.sqlite")
    replayer = Replayer(workflows=[], plugins=[SessionPlugin([flow], store=store)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    await store.close()


def _model_steps(history: WorkflowHistory) -> int:
    return sum(
        e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name.endswith(
            ".run_model"
        )
        for e in history.events
    )


async def test_a_message_during_the_wait_to_continue_as_new_replays(
    client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    history = await _first_run(client, tmp_path, receiver)
    if _LABEL:
        RECORDED.mkdir(parents=True, exist_ok=True)
        (RECORDED / f"message_during_wait.{_LABEL}.json").write_text(history.to_json())
    else:
        # The current code took the patched path: the message's turn (a third
        # model Step, after the approved call's two) ran in the first run.
        assert PATCH in patch_markers(history)
        assert _model_steps(history) == 3
    assert history.events[-1].event_type == (
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    )
    await _replays(history, tmp_path / "fresh")

    files = sorted(RECORDED.glob("*.json"))
    labels = {p.name.split(".", 1)[1].removesuffix(".json") for p in files}
    assert {f"pre-{PATCH}", PATCH} <= labels
    for path in files:
        recorded = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
        # Recorded before the patch: the turn waited for the next run.
        patched = PATCH in patch_markers(recorded)
        assert patched == (not path.name.endswith(f".pre-{PATCH}.json")), path.name
        assert _model_steps(recorded) == (3 if patched else 2), path.name
        await _replays(recorded, tmp_path / path.stem)

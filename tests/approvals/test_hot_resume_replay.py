"""Histories of hot-resumed sessions replay on the current workflow code.

The scripted runner of `tests/engine/test_replay.py` cannot park a segment,
so the histories with the `hot-resume` patch come from the real CLI: an
approval answered by the parked segment, and a cancel that released its park.
`DEX_AGENTS_RECORD_HISTORIES=<label>` writes them to `tests/histories/hot/`;
every recorded one keeps replaying, and a fresh one is replayed each run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, SessionPlugin, create_worker
from support import hot_agent
from support.claude_rig import ClaudeRig
from support.history import marked_in_first_task, patch_markers

pytestmark = pytest.mark.timeout(180)

HOT = Path(__file__).parents[1] / "histories" / "hot"
REFUND = 'dex-script: call create_refund {"orderId": "7"}'
_LABEL = os.environ.get("DEX_AGENTS_RECORD_HISTORIES", "")


def _parked_queues(history: WorkflowHistory, flow_queue: str) -> set[str]:
    """The task queues, other than the flow's, that the history sent Steps to."""
    return {
        event.activity_task_scheduled_event_attributes.task_queue.name
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    } - {flow_queue}


async def _replays(history: WorkflowHistory, tmp_path: Path) -> None:
    store = SQLiteRuntimeStore(tmp_path / "replay.sqlite")
    replayer = Replayer(
        workflows=[], plugins=[SessionPlugin([hot_agent.flow], store=store)]
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    await store.close()


async def test_hot_resumed_sessions_replay(
    claude_rig: ClaudeRig, client: Client, tmp_path: Path
) -> None:
    flow = hot_agent.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    recorded: dict[str, WorkflowHistory] = {}
    async with create_worker(client, [flow], store=store):
        for name, answer in (("hot_approved", "approve"), ("hot_cancelled", "cancel")):
            sid = f"hot-replay-{name}"
            await sessions.start(sid, initial_message=REFUND)
            (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
            if answer == "approve":
                await sessions.resolve_interrupt(
                    sid, interrupt.interrupt_id, approved=True
                )
            else:
                await sessions.cancel_turn(sid)
            await sessions.wait_for_idle(sid)
            history = await client.get_workflow_handle(sid).fetch_history()
            text = history.to_json()
            # It took the new path: the run began patched, and its resumed
            # segment went to the parking worker's own queue.
            assert patch_markers(history) == ["patches-at-start", "patches-at-start-2"]
            assert marked_in_first_task(history)
            assert _parked_queues(history, flow.task_queue)
            recorded[name] = history
            if _LABEL:
                HOT.mkdir(parents=True, exist_ok=True)
                (HOT / f"{name}.{_LABEL}.json").write_text(text)
    await store.close()

    for history in recorded.values():
        await _replays(history, tmp_path)
    files = sorted(HOT.glob("*.json"))
    assert {p.name.split(".", 1)[0] for p in files} == set(recorded)
    for path in files:
        await _replays(
            WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text()), tmp_path
        )

"""Sessions carried by release 0.1.0 continue on this worker.

`tests/carried_states/` holds what a 0.1.0 worker wrote: the continue-as-new
input of two sessions (one waiting for approval, one idle after a failed
turn) and the runtime store file with their transcripts. Each test starts a
run from that input exactly as the server would hand it over (the JSON
payload, decoded by the worker) on a copy of that store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import RawValue

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config

CARRIED = Path(__file__).parent.parent / "carried_states"


async def _continue_carried(
    client: Client, flow_type: str, name: str, session_id: str
) -> None:
    """Start `session_id` from the carried input `name`, as continue-as-new would."""
    data = (CARRIED / name).read_bytes()
    assert json.loads(data)["state"]["session_id"] == session_id
    payload = Payload(metadata={"encoding": b"json/plain"}, data=data)
    await client.start_workflow(
        flow_type, RawValue(payload), id=session_id, task_queue=flow_type
    )


def _store(tmp_path: Path) -> SQLiteRuntimeStore:
    path = tmp_path / "runtime.sqlite"
    shutil.copy(CARRIED / "runtime.0.1.0.sqlite", path)
    return SQLiteRuntimeStore(path)


async def test_a_session_waiting_for_approval_under_0_1_0_runs_its_write_once(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store = _store(tmp_path)
    sessions = SessionClient(client, flow, store)
    sid = "legacy-waiting"
    async with create_worker(client, [flow], store=store):
        await _continue_carried(
            client, flow_type, "waiting_for_approval.0.1.0.json", sid
        )
        waiting = await sessions.wait_for_idle(sid)
        (interrupt,) = waiting.pending_interrupts
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        done = await sessions.wait_for_idle(sid)
        assert not await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        await sessions.send_user_message(sid, "recall")
        recalled = await sessions.wait_for_idle(sid)
        history = [t async for t in sessions.history(sid)]
    await store.close()
    assert waiting.status == "waiting_for_approval"
    assert interrupt.tool_name == "create_refund"
    # The finished turns 0.1.0 carried moved to the store's turn log.
    assert [t.turn_id for t in waiting.turns] == ["turn-1", "turn-2", "turn-3"]
    assert [t.final_text for t in waiting.turns[:2]] == [
        "said: warm up",
        "said: second turn",
    ]
    assert done.turns[-1].final_text == "done: create_refund=refunded order 4"
    assert Ledger(config.ledger_path).count("create_refund") == 1
    # The transcript 0.1.0 wrote is still the conversation.
    assert recalled.turns[-1].final_text == (
        'recalled: say warm up | say second turn | call create_refund {"orderId": "4"}'
    )
    assert [t.turn_id for t in history] == ["turn-4", "turn-3", "turn-2", "turn-1"]


async def test_an_idle_session_carried_by_0_1_0_keeps_its_turns_note_and_interrupts(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type)
    flow = ledger_flow(config)
    store = _store(tmp_path)
    sessions = SessionClient(client, flow, store)
    sid = "legacy-idle"
    carried = json.loads((CARRIED / "idle_after_failure.0.1.0.json").read_text())
    (old_interrupt,) = carried["state"]["interrupts"]
    async with create_worker(client, [flow], store=store):
        await _continue_carried(client, flow_type, "idle_after_failure.0.1.0.json", sid)
        idle = await sessions.wait_for_idle(sid, turns=10)
        # An interrupt of a finished turn: a repeat is answered False, not "unknown".
        assert not await sessions.resolve_interrupt(sid, old_interrupt, approved=True)
        await sessions.send_user_message(sid, "recall")
        recalled = await sessions.wait_for_idle(sid)
    await store.close()
    assert idle.status == "idle"
    assert idle.turn_count == 6
    assert [t.status for t in idle.turns] == ["completed"] * 5 + ["failed"]
    assert idle.pending_interrupts == []
    assert idle.pending_prompts == ["fail"]
    assert Ledger(config.ledger_path).count("create_refund") == 0
    # The failed turn's prompt and its note reach the next turn.
    assert recalled.turns[-1].final_text == (
        "recalled: say idle turn 1 | say idle turn 2 | say idle turn 3 | "
        'say idle turn 4 | call create_refund {"orderId": "5"} | fail'
        " (after 1 failure note(s))"
    )

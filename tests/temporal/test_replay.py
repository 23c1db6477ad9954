"""Recorded session histories replay on the current workflow code (determinism guard).

Record new histories after a deliberate, `workflow.patched()`-guarded change with
`DEX_AGENTS_RECORD_HISTORIES=1 pytest tests/temporal/test_replay.py`; never
re-record to make a failing replay pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from session_harness import make_config
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.temporal._converter import data_converter as pydantic_data_converter
from dex_agents.testing import ledger_flow

HISTORIES = Path(__file__).parent.parent / "histories"
FLOW_TYPE = "ReplaySupportFlow"
SCENARIOS = {
    "say": ["say hello", "recall"],
    "approved_write": ['call create_refund {"orderId": "7"}'],
    "rejected_write_and_failed_turn": [
        'call create_refund {"orderId": "8"}',
        "fail",
        "say after failure",
    ],
}


def _flow(tmp_path: Path):
    return ledger_flow(make_config(tmp_path, FLOW_TYPE))


@pytest.mark.skipif(
    os.environ.get("DEX_AGENTS_RECORD_HISTORIES") != "1",
    reason="records histories only when DEX_AGENTS_RECORD_HISTORIES=1",
)
async def test_record_histories(client: Client, tmp_path: Path) -> None:
    flow = _flow(tmp_path)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        for name, prompts in SCENARIOS.items():
            sid = f"replay-{name}-{os.getpid()}"
            await sessions.start(sid)
            for prompt in prompts:
                await sessions.send_user_message(sid, prompt)
                snap = await sessions.wait_for_idle(sid)
                for interrupt in snap.pending_interrupts:
                    await sessions.resolve_interrupt(
                        sid,
                        interrupt.interrupt_id,
                        approved=name == "approved_write",
                        rejection_message="no",
                    )
                    await sessions.wait_for_idle(sid)
            history = await client.get_workflow_handle(sid).fetch_history()
            (HISTORIES / f"{name}.json").write_text(history.to_json())
    await store.close()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_recorded_history_replays(name: str, tmp_path: Path) -> None:
    path = HISTORIES / f"{name}.json"
    history = WorkflowHistory.from_json(f"replay-{name}", path.read_text())
    replayer = Replayer(
        workflows=[_flow(tmp_path).workflow_class],
        data_converter=pydantic_data_converter,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None

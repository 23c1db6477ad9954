"""Recorded session histories replay on the current workflow code (determinism guard).

Record new histories after a deliberate, `workflow.patched()`-guarded change with
`DEX_AGENTS_RECORD_HISTORIES=<label> pytest tests/temporal/test_replay.py`, which
writes `<scenario>.<label>.json` beside the older ones: every recorded history
keeps replaying, so a session started on any earlier release can continue.
Never re-record to make a failing replay pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from session_harness import make_config
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, SessionPlugin, create_worker
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


_LABEL = os.environ.get("DEX_AGENTS_RECORD_HISTORIES", "")


@pytest.mark.skipif(
    not _LABEL, reason="records histories only when DEX_AGENTS_RECORD_HISTORIES=<label>"
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
            (HISTORIES / f"{name}.{_LABEL}.json").write_text(history.to_json())
    await store.close()


RECORDED = sorted(HISTORIES.glob("*.json"))


def test_every_scenario_is_recorded_before_and_after_each_patch() -> None:
    labels = {p.name.split(".", 1)[1].removesuffix(".json") for p in RECORDED}
    assert {"0.1.0", "tool-record-attempts"} <= labels
    for label in labels:
        assert {p.name for p in RECORDED if p.name.endswith(f".{label}.json")} == {
            f"{name}.{label}.json" for name in SCENARIOS
        }


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
async def test_recorded_history_replays(path: Path, tmp_path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    flow = _flow(tmp_path)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    replayer = Replayer(workflows=[], plugins=[SessionPlugin([flow], store=store)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None

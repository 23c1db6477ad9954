"""Recorded session histories replay on the current workflow code (determinism guard).

Record new histories after a deliberate, `workflow.patched()`-guarded change with
`DEX_AGENTS_RECORD_HISTORIES=<label> pytest tests/engine/test_replay.py`, which
writes `<scenario>.<label>.json` beside the older ones: every recorded history
keeps replaying, so a session started on any earlier release can continue.
Never re-record to make a failing replay pass.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from dex_agents.session._state import Interrupt
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, SessionPlugin, _workflow, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from support.history import marked_in_first_task, patch_markers
from support.session_harness import ledger_config
from support.webhook_receiver import Receiver, receiver

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
LATER_SCENARIOS = {
    "edited_write": ['call create_refund {"orderId": "7"}'],
    "cancelled_turns": [
        "stream 6 ;; pause held",
        'call create_refund {"orderId": "3"}',
    ],
    "budget_pause": ["say one", "say two", "say three", "say four"],
    "ended": ["say bye"],
}
"""Scenarios of features added after the first labels: recorded from `approvals-0.2` on."""
FIRST_LABELS = {"0.1.0", "tool-record-attempts"}
SPEND_LIMIT = 0.0025
"""Reached only by `budget_pause`'s fourth turn (a scripted segment costs 0.001)."""


def _flow(tmp_path: Path, webhook_url: str = "http://127.0.0.1:9/replay-only"):
    # Every label replays on these options: a spend limit no earlier scenario
    # reaches, and approvals told to a webhook (the replayer runs no activity).
    return ledger_flow(
        ledger_config(
            tmp_path, FLOW_TYPE, spend_limit=SPEND_LIMIT, webhook_url=webhook_url
        )
    )


_LABEL = os.environ.get("DEX_AGENTS_RECORD_HISTORIES", "")


async def _scenario_histories(
    client: Client, tmp_path: Path, receiver: Receiver
) -> dict[str, WorkflowHistory]:
    """Every scenario, run fresh on the current code: its history by name."""
    flow = _flow(tmp_path, receiver.url)
    gates = tmp_path / "gates"
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    histories: dict[str, WorkflowHistory] = {}
    async with create_worker(client, [flow], store=store):
        for name, prompts in {**SCENARIOS, **LATER_SCENARIOS}.items():
            sid = f"replay-{name}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
            await sessions.start(sid)
            for prompt in prompts:
                await sessions.send_user_message(sid, prompt)
                if "pause held" in prompt:
                    async with asyncio.timeout(30):
                        while not (gates / "held.reached").exists():
                            await asyncio.sleep(0.02)
                    await sessions.cancel_turn(sid, reason="recorded")
                snap = await sessions.wait_for_idle(sid)
                for interrupt in snap.pending_interrupts:
                    await _answer(sessions, name, sid, interrupt)
                    await sessions.wait_for_idle(sid)
            if name == "ended":
                await sessions.end(sid, reason="recorded")
            histories[name] = await client.get_workflow_handle(sid).fetch_history()
    await store.close()
    return histories


@pytest.mark.skipif(
    not _LABEL, reason="records histories only when DEX_AGENTS_RECORD_HISTORIES=<label>"
)
async def test_record_histories(
    client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    for name, history in (
        await _scenario_histories(client, tmp_path, receiver)
    ).items():
        (HISTORIES / f"{name}.{_LABEL}.json").write_text(history.to_json())


async def test_a_new_run_marks_its_patches_in_its_first_task(
    client: Client, tmp_path: Path, receiver: Receiver
) -> None:
    # Every scenario asks its patches (a tool Step's attempts, a turn's start, a
    # spent budget, a notified approval, an approval's events with its Step) on
    # current code: the two at-start markers, in the first task, and no other
    # but the idle start's publish (each scenario starts its session idle).
    for name, history in (
        await _scenario_histories(client, tmp_path, receiver)
    ).items():
        assert patch_markers(history) == [
            "patches-at-start",
            "patches-at-start-2",
            "publish-idle-start",
        ], name
        assert marked_in_first_task(history), name


async def _answer(
    sessions: SessionClient, scenario: str, sid: str, interrupt: Interrupt
) -> None:
    """How each scenario answers its approvals."""
    iid = interrupt.interrupt_id
    match scenario:
        case "approved_write":
            await sessions.resolve_interrupt(sid, iid, approved=True)
        case "edited_write":
            await sessions.resolve_interrupt(
                sid, iid, approved=True, edited_input={"orderId": "8"}
            )
        case "cancelled_turns":
            await sessions.cancel_turn(sid)
        case "budget_pause":
            await sessions.resolve_interrupt(
                sid, iid, approved=True, new_spend_limit=1.0
            )
        case _:
            await sessions.resolve_interrupt(
                sid, iid, approved=False, rejection_message="no"
            )


__all__ = ["receiver"]  # the fixture, imported
RECORDED = sorted(HISTORIES.glob("*.json"))


def test_every_scenario_is_recorded_before_and_after_each_patch() -> None:
    labels = {p.name.split(".", 1)[1].removesuffix(".json") for p in RECORDED}
    assert {*FIRST_LABELS, "approvals-0.2"} <= labels
    for label in labels:
        names = SCENARIOS if label in FIRST_LABELS else {**SCENARIOS, **LATER_SCENARIOS}
        assert {p.name for p in RECORDED if p.name.endswith(f".{label}.json")} == {
            f"{name}.{label}.json" for name in names
        }


def test_a_label_named_for_a_patch_holds_that_patch() -> None:
    # Histories recorded to guard a patch must have taken the patched path
    # (in the scenarios that reach it): else they guard nothing.
    patches = {
        value
        for name, value in vars(_workflow).items()
        if name.startswith("_PATCH_") and isinstance(value, str)
    }
    marked: dict[str, int] = {}
    for path in RECORDED:
        label = path.name.split(".", 1)[1].removesuffix(".json")
        if label in patches:
            history = WorkflowHistory.from_json(path.stem, path.read_text())
            marked[label] = marked.get(label, 0) + (label in patch_markers(history))
    assert {"tool-record-attempts", "patches-at-start", "publish-idle-start"} <= set(
        marked
    )
    assert all(marked.values()), marked


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
async def test_recorded_history_replays(path: Path, tmp_path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    flow = _flow(tmp_path)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    replayer = Replayer(workflows=[], plugins=[SessionPlugin([flow], store=store)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None

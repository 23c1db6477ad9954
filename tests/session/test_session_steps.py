"""Steps and their failure rules: retries, outcome_unknown, failure notes, deadlines, events;
and usage, summed over a turn's segments and a session's turns."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from dex_agents.session import (
    AgentSessionOptions,
)
from dex_agents.session._events import EventRecord
from dex_agents.session._usage import Usage
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import (
    SessionClient,
    create_agent_session_flow,
    create_worker,
)
from dex_agents.testing import ScriptedRunner
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import Harness, RecordingRunner, flow_around, ledger_config


async def test_idempotent_write_retries_with_the_same_key(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "fail_attempts": 1}'
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: send_email=sent to a@b.c"
    assert snap.turns[0].tool_calls[0].attempts == 2
    attempts = harness.ledger.entries("send_email_attempt")
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert [a["key"] for a in attempts] == [f"{sid}/turn-1/call_turn-1_0"] * 2
    assert harness.ledger.count("send_email") == 1


async def test_idempotent_write_out_of_attempts_is_outcome_unknown(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "fail_attempts": 9}'
    )
    snap = await harness.sessions.wait_for_idle(sid)
    (record,) = snap.turns[0].tool_calls
    assert (record.status, record.attempts) == ("outcome_unknown", 3)
    assert [a["attempt"] for a in harness.ledger.entries("send_email_attempt")] == [
        1,
        2,
        3,
    ]
    assert harness.ledger.count("send_email") == 0


async def test_each_attempt_reads_the_checkpoint_the_previous_attempt_left(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call send_email {"to": "a@b.c", "fail_attempts": 2}'
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].tool_calls[0].status == "finished"
    checkpoints = [
        a["checkpoint"] for a in harness.ledger.entries("send_email_attempt")
    ]
    assert checkpoints == [None, {"reached_attempt": 1}, {"reached_attempt": 2}]


async def test_tool_execution_error_records_failed(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "5", "invalid": true}'
    )
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    await harness.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    snap = await harness.sessions.wait_for_idle(sid)
    (record,) = snap.turns[0].tool_calls
    assert (record.status, record.output) == ("failed", "order 5 cannot be refunded")
    assert record.attempts == 1
    assert harness.ledger.count("create_refund_started") == 1


async def test_failed_turn_leaves_a_note_the_next_turn_sees(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "3"} ;; fail_after_tools'
    )
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    await harness.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].status == "failed"
    assert "scripted failure after tools" in (snap.turns[0].error or "")
    assert harness.ledger.count("create_refund") == 1
    await harness.sessions.send_user_message(sid, "say still here")
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.status == "idle"
    assert snap.turns[1].final_text == "said: still here (after 1 failure note(s))"
    notes = [m for m in snap.messages if m.role == "note"]
    assert len(notes) == 1
    assert "create_refund call_turn-1_0: finished" in notes[0].text
    # The failed prompt reaches the transcript with the note, before the new prompt.
    assert [m.text for m in snap.messages if m.role == "user"] == [
        'call create_refund {"orderId": "3"} ;; fail_after_tools',
        "say still here",
    ]


async def test_run_model_retry_then_success(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message="fail_once")
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].status == "completed"
    assert snap.transcript_head == "turn-1/run_model/1/attempt-2"


async def test_events_can_be_followed_while_the_turn_runs(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message="stream 6 ;; pause midway")
    seen: list[EventRecord] = []

    async def follow() -> None:
        async for event in harness.sessions.follow(sid):
            seen.append(event)
            if event.type == "turn_completed":
                return

    follower = asyncio.create_task(follow())
    async with asyncio.timeout(30):
        while not any(e.type == "text_delta" for e in seen):
            await asyncio.sleep(0.01)
    # The turn is still running (held at the gate) while its deltas are visible.
    assert (await harness.sessions.snapshot(sid)).status == "running"
    assert not any(e.type == "turn_completed" for e in seen)
    harness.open_gate("midway")
    await asyncio.wait_for(follower, 30)
    deltas = [e for e in seen if e.type == "text_delta"]
    assert [d.data["text"] for d in deltas][:6] == [f"t{i} " for i in range(6)]
    assert {(d.turn_id, d.step_execution_id, d.attempt) for d in deltas} == {
        ("turn-1", "turn-1/run_model/1", 1)
    }
    assert [d.seq for d in deltas] == sorted(d.seq for d in deltas)
    assert seen[0].type == "turn_started"


async def test_spend_limit_pauses_before_the_next_segment(
    client: Client, tmp_path: Path, flow_type: str
) -> None:

    base = ledger_flow(ledger_config(tmp_path, flow_type))
    flow = create_agent_session_flow(
        base.runner, flow_type, replace(base.options, spend_limit=0.0015)
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("spend", initial_message="say one")
        await sessions.wait_for_idle("spend")
        await sessions.send_user_message("spend", "say two")  # 0.001 spent: still under
        await sessions.wait_for_idle("spend")
        await sessions.send_user_message("spend", "say three")  # 0.002 spent: over
        snap = await sessions.wait_for_idle("spend")
        assert snap.status == "budget_reached"
        (budget,) = snap.pending_interrupts
        await sessions.resolve_interrupt("spend", budget.interrupt_id, approved=False)
        snap = await sessions.wait_for_idle("spend")
    await store.close()
    assert [t.status for t in snap.turns] == ["completed", "completed", "failed"]
    assert "spend limit reached" in (snap.turns[2].error or "")
    assert snap.usage.model_calls == 2  # the third segment never started


async def test_run_model_limit_bounds_a_segment(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    from datetime import timedelta

    base = ledger_flow(ledger_config(tmp_path, flow_type))
    flow = create_agent_session_flow(
        base.runner,
        flow_type,
        replace(
            base.options, run_model_limit=timedelta(seconds=1), run_model_attempts=1
        ),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("limit", initial_message="say never ;; pause never-opened")
        snap = await sessions.wait_for_idle("limit")
    await store.close()
    assert snap.turns[0].status == "failed"
    assert "run_model_limit" in (snap.turns[0].error or "")


async def test_failed_turn_writes_a_turn_failed_event(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message="fail")
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].status == "failed"
    events = await harness.sessions.events(sid)
    failed = [e for e in events if e.type == "turn_failed"]
    assert [e.data["turn_id"] for e in failed] == ["turn-1"]
    assert "scripted failure" in str(failed[0].data["error"])


async def test_a_bug_in_a_runner_s_message_builder_fails_the_turn_not_the_session(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """The runner's message builder runs in RunModel (not in workflow code), so a bug
    there fails that turn's attempts like any runner error, and the session lives on."""

    from dex_agents.session._json import JsonObject

    class BuggyRunner(ScriptedRunner):
        def build_user_message(self, text: str) -> JsonObject:
            if text == "boom":
                raise KeyError("missing")
            return super().build_user_message(text)

    flow = create_agent_session_flow(
        BuggyRunner(),
        flow_type,
        AgentSessionOptions(retry_interval=timedelta(milliseconds=50)),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("buggy")
        assert await sessions.send_user_message("buggy", "boom")
        snap = await asyncio.wait_for(sessions.wait_for_idle("buggy"), 30)
        assert [t.status for t in snap.turns] == ["failed"]
        assert "KeyError" in (snap.turns[0].error or "")
        status = (await client.get_workflow_handle("buggy").describe()).status
        assert status == WorkflowExecutionStatus.RUNNING
    await store.close()


async def test_always_failing_segment_runs_run_model_attempts_then_fails_with_a_note(
    client: Client, tmp_path: Path, flow_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = ledger_config(tmp_path, flow_type)
    runner = RecordingRunner(config)
    # 4, not the default 3: the count must come from the option.
    flow = flow_around(
        tmp_path,
        flow_type,
        runner,
        run_model_attempts=4,
        retry_interval=timedelta(milliseconds=50),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("audit-eng-c25-attempts", initial_message="fail")
        failed = await sessions.wait_for_idle("audit-eng-c25-attempts")
        assert runner.attempts == [("turn-1/run_model/1", n) for n in (1, 2, 3, 4)]
        await sessions.send_user_message("audit-eng-c25-attempts", "say after")
        snap = await sessions.wait_for_idle("audit-eng-c25-attempts")
    await store.close()
    (turn,) = failed.turns
    assert turn.status == "failed"
    # The last attempt's error (Temporal's ApplicationError text names its type).
    assert turn.error == "SessionError: scripted failure (attempt 4)"
    assert failed.transcript_head is None  # no failed attempt became the head
    assert failed.usage == Usage()
    # No fifth attempt ran later, and the next turn ran one attempt.
    assert runner.attempts[4:] == [("turn-2/run_model/1", 1)]
    # The failure note reached the next turn's model and the transcript.
    assert snap.turns[1].final_text == "said: after (after 1 failure note(s))"
    notes = [m for m in snap.messages if m.role == "note"]
    assert [n.text for n in notes] == [
        "The previous turn (turn-1) failed: SessionError: scripted failure (attempt 4)\n"
        "No tool call ran before it failed."
    ]
    # The worker's log: one line per failed attempt with its reason, no traceback.
    said = [
        r.getMessage()
        for r in caplog.records
        if "model segment of audit-eng-c25-attempts" in r.getMessage()
    ]
    assert len(said) == 4, said
    assert (
        "attempt 1 failed (it is tried again): scripted failure (attempt 1)" in said[0]
    )
    assert not [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.exc_info is not None
    ], "a traceback in the worker's log"


def _total(usages: list[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total + usage
    return total


async def test_turn_usage_sums_its_segments_and_session_usage_sums_its_turns(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type)
    runner = RecordingRunner(config, distinct_usage=True)
    flow = flow_around(tmp_path, flow_type, runner)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "audit-eng-c27-usage"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, 'call create_refund {"orderId": "27"}')
        waiting = await sessions.wait_for_idle(sid)
        (interrupt,) = waiting.pending_interrupts
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, "say three")
        snap = await sessions.wait_for_idle(sid)
        projected = await store.get_snapshot(sid)
    await store.close()
    seg = runner.segment_usage
    assert list(seg) == [
        "turn-1/run_model/1",
        "turn-2/run_model/1",
        "turn-2/run_model/2",  # the segment resumed after the approved write
        "turn-3/run_model/1",
    ]
    assert len(set(seg.values())) == 4  # every segment reported its own usage
    assert [t.status for t in snap.turns] == ["completed"] * 3
    assert snap.turns[1].tool_calls[0].status == "finished"
    # While the write waited for approval, the turn held its first segment only.
    assert waiting.turns[1].usage == seg["turn-2/run_model/1"]
    assert waiting.usage == seg["turn-1/run_model/1"] + seg["turn-2/run_model/1"]
    # Each turn is the sum of its segments...
    assert [t.usage for t in snap.turns] == [
        seg["turn-1/run_model/1"],
        seg["turn-2/run_model/1"] + seg["turn-2/run_model/2"],
        seg["turn-3/run_model/1"],
    ]
    assert snap.turns[1].usage == Usage(
        input_tokens=201 + 301,
        output_tokens=23 + 33,
        cached_input_tokens=14 + 21,
        reasoning_tokens=2 + 3,
        model_calls=2 + 3,
        cost_usd=0.25 + 0.375,
    )
    # ...and the session is the sum of its turns (and of every segment).
    assert snap.usage == _total([t.usage for t in snap.turns])
    assert snap.usage == _total(list(seg.values()))
    assert snap.usage == Usage(  # segments n = 1..4, spelled out
        input_tokens=1004,
        output_tokens=112,
        cached_input_tokens=70,
        reasoning_tokens=10,
        model_calls=10,
        cost_usd=1.25,
    )
    # The store's projection of the snapshot says the same.
    assert projected is not None
    assert projected["usage"] == {
        "input_tokens": snap.usage.input_tokens,
        "output_tokens": snap.usage.output_tokens,
        "cached_input_tokens": snap.usage.cached_input_tokens,
        "reasoning_tokens": snap.usage.reasoning_tokens,
        "model_calls": snap.usage.model_calls,
        "cost_usd": snap.usage.cost_usd,
    }

"""Sessions that never outgrow Temporal: state, payloads and snapshots stay bounded.

Every size here is read from the server (history events, the continue-as-new
input, the raw Query answer), never computed from our own models.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from dex_agents import InvalidArgumentError, MessageTooLargeError, UserError
from dex_agents.session import AgentSessionOptions, ToolPolicy
from dex_agents.session._blob import blob_reference
from dex_agents.session._json import JsonObject
from dex_agents.session._pending import MAX_QUEUED_MESSAGES, MAX_USER_MESSAGE_BYTES
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.temporal._activities import _engine_error  # pyright: ignore[reportPrivateUsage]
from dex_agents.temporal._arguments import INVALID_ARGUMENT
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import Ledger, ScriptedRunner
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow
from support.history import settled_history_length
from support.session_harness import ledger_config

CARRIED_LIMIT = 64 * 1024
EVENT_LIMIT = 256 * 1024
QUERY_LIMIT = 64 * 1024


async def _runs(client: Client, session_id: str) -> list[str]:
    """Run IDs of the session, oldest first."""
    runs = [w async for w in client.list_workflows(f"WorkflowId = '{session_id}'")]
    return [r.run_id for r in sorted(runs, key=lambda r: r.start_time)]


async def _history(client: Client, session_id: str, run_id: str) -> list[HistoryEvent]:
    handle = client.get_workflow_handle(session_id, run_id=run_id)
    return list((await handle.fetch_history()).events)


def _carried_bytes(events: list[HistoryEvent]) -> int:
    """Size of the run's input: the state the previous run carried (0 for the first)."""
    payloads = events[0].workflow_execution_started_event_attributes.input.payloads
    return sum(p.ByteSize() for p in payloads)


async def _query_bytes(client: Client, session_id: str) -> int:
    raw = await client.get_workflow_handle(session_id).query(
        "get_agent_snapshot", result_type=RawValue
    )
    return raw.payload.ByteSize()


def _rig(
    client: Client, tmp_path: Path, flow_type: str, **overrides: object
) -> tuple[LedgerFlowConfig, AgentSessionFlow, SQLiteRuntimeStore, SessionClient]:
    """A ledger flow (with `overrides` in its config), its store and a session client."""
    config = ledger_config(tmp_path, flow_type, **overrides)
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    return config, flow, store, SessionClient(client, flow, store)


def _filler(n: int, seed: str) -> str:
    """`n` characters that differ per seed (so no two messages share a blob)."""
    unit = hashlib.sha256(seed.encode()).hexdigest()
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.timeout(900)
async def test_1000_turns_of_10_kb_messages_stay_bounded_and_every_turn_reads_back(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = _rig(
        client, tmp_path, flow_type, continue_as_new_after_events=400
    )
    sid = "bounded-1000-turns"
    turns = 1000
    texts = [f"say {n:04d} " + _filler(10_240, str(n)) for n in range(1, turns + 1)]
    query_sizes: list[int] = []
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid)
        for n, text in enumerate(texts, start=1):
            await sessions.send_user_message(sid, text)
            snap = await sessions.wait_for_idle(sid, turns=1)
            # 10 KB in, 10 KB out: the answer quotes the message.
            assert snap.turns[-1].turn_id == f"turn-{n}"
            assert snap.turns[-1].status == "completed"
            if n % 50 == 0:
                query_sizes.append(await _query_bytes(client, sid))
        query_sizes.append(await _query_bytes(client, sid))
        history = [t async for t in sessions.history(sid, page_size=128)]
        runs = await _runs(client, sid)
        tail = await sessions.snapshot(sid, turns=3)
    assert len(runs) >= 10, f"the session continued as new only {len(runs) - 1} times"
    carried: list[int] = []
    largest_event = 0
    for run_id in runs:
        events = await _history(client, sid, run_id)
        carried.append(_carried_bytes(events))
        largest_event = max(largest_event, *(e.ByteSize() for e in events))
    await store.close()
    assert max(carried) <= CARRIED_LIMIT, f"carried state: {carried}"
    assert largest_event <= EVENT_LIMIT, f"largest history event: {largest_event} B"
    assert max(query_sizes) <= QUERY_LIMIT, f"snapshot query answers: {query_sizes}"
    # Flat, not merely under the limit: the last carried state is no bigger than
    # an early one plus a little (the fixed-size windows filling up).
    assert carried[-1] <= carried[1] + 24 * 1024, f"carried state grew: {carried}"
    # Every turn reads back from the store, in order, with its answer.
    assert [t.turn_id for t in reversed(history)] == [
        f"turn-{n}" for n in range(1, turns + 1)
    ]
    for turn, text in zip(reversed(history), texts, strict=True):
        assert turn.status == "completed"
        assert turn.final_text.startswith(f"said: {text[4:100]}")
    assert tail.turn_count == turns
    assert [t.turn_id for t in tail.turns] == ["turn-998", "turn-999", "turn-1000"]
    said = [m.text for m in tail.messages if m.role == "user"]
    assert said == texts[-3:]


async def test_3_mb_and_20_mb_messages_are_answered_whole_and_history_stays_small(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = "bounded-large-messages"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid)
        for size in (3_000_000, 20_000_000):
            text = "digest " + _filler(size, str(size))
            assert await sessions.send_user_message(sid, text)
            snap = await sessions.wait_for_idle(sid)
            digest = hashlib.sha256(text.encode()).hexdigest()
            assert snap.turns[-1].final_text == (
                f"digest: {len(text)} chars, sha256 {digest}"
            )
            # The transcript keeps the whole message; the snapshot shows a preview.
            assert snap.messages[-2].text == text
            assert len(snap.turns[-1].prompts[0]) <= 200
        (run_id,) = await _runs(client, sid)
        events = await _history(client, sid, run_id)
    await store.close()
    big = [(e.event_type, e.ByteSize()) for e in events if e.ByteSize() > 16 * 1024]
    assert big == []


async def test_a_message_over_the_maximum_names_the_limit_and_writes_nothing(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = "bounded-over-maximum"
    text = "x" * (MAX_USER_MESSAGE_BYTES + 1)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say before")
        before = await sessions.wait_for_idle(sid)
        length = await settled_history_length(client, sid)
        with pytest.raises(UserError) as refused:
            await sessions.send_user_message(sid, text)
        after = await sessions.snapshot(sid)
        after_length = await settled_history_length(client, sid)
    ref = blob_reference("msg", text.encode())
    with pytest.raises(KeyError):
        await store.get_blob(sid, ref.blob_id)
    await store.close()
    assert "33,554,433 bytes" in str(refused.value)
    assert "33,554,432 bytes (32 MiB" in str(refused.value)
    assert after.turn_count == before.turn_count == 1
    assert after.pending_prompts == []
    assert after_length == length


async def test_a_message_too_large_for_the_model_fails_its_turn_and_the_next_is_answered(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = _rig(
        client, tmp_path, flow_type, max_input_bytes=1_000_000
    )
    sid = "bounded-too-large-for-model"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say " + _filler(2_000_000, "big"))
        failed = await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, "recall")
        answered = await sessions.wait_for_idle(sid)
    await store.close()
    assert [t.status for t in failed.turns] == ["failed"]
    assert "over the model's limit of 1000000 bytes" in (failed.turns[0].error or "")
    assert failed.pending_prompts == []  # the refused message is not kept
    assert [t.status for t in answered.turns] == ["failed", "completed"]
    # The next turn sent the note (which says the message was dropped), not the message.
    (note,) = [m for m in answered.messages if m.role == "note"]
    assert "too large for the model and were not kept" in note.text
    assert answered.turns[-1].final_text == "recalled:  (after 1 failure note(s))"


async def test_long_tool_inputs_and_outputs_travel_by_reference_and_arrive_whole(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = "bounded-tool-output"
    sku = _filler(300_000, "sku")
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message=f'call check_stock {{"sku": "{sku}"}}'
        )
        snap = await sessions.wait_for_idle(sid)
        (interrupt,) = snap.pending_interrupts
        # The approval shows the exact 300 KB input, read back from the store.
        assert interrupt.arguments == {"sku": sku}
        assert interrupt.arguments_ref is None
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        snap = await sessions.wait_for_idle(sid)
        (run_id,) = await _runs(client, sid)
        events = await _history(client, sid, run_id)
    await store.close()
    (stock,) = Ledger(config.ledger_path).entries("check_stock")
    assert stock["sku"] == sku  # the tool got the whole input
    # The model read the whole 300 KB output in the resumed segment.
    assert snap.messages[-1].text == f"done: check_stock={sku}: 3 left"
    (record,) = snap.turns[-1].tool_calls
    assert record.status == "finished" and len(record.output or "") <= 1000
    completed = [
        e.activity_task_completed_event_attributes.result
        for e in events
        if e.HasField("activity_task_completed_event_attributes")
    ]
    # The tool Step's result in history is a preview and a reference, not 300 KB.
    assert min(r.ByteSize() for r in completed) <= 2 * 1024
    # No event carries the input or the output: they travel by reference.
    big = [(e.event_type, e.ByteSize()) for e in events if e.ByteSize() > 16 * 1024]
    assert big == []


async def test_waiting_on_an_idle_session_adds_no_history(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = "bounded-idle-wait"
    handle = client.get_workflow_handle(sid)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say hi")
        await sessions.wait_for_idle(sid)
        await settled_history_length(client, sid)
        before = (await handle.describe()).raw_description.workflow_execution_info
        for _ in range(5):
            snap = await sessions.wait_for_idle(sid)
            assert snap.status == "idle"
        after = (await handle.describe()).raw_description.workflow_execution_info
    await store.close()
    assert after.history_length == before.history_length
    assert after.history_size_bytes == before.history_size_bytes


async def test_the_snapshot_pages_turns_and_the_history_walks_back(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = "bounded-paging"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid)
        for n in range(1, 8):
            await sessions.send_user_message(sid, f"say {n}")
            await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, 'call create_refund {"orderId": "9"}')
        waiting = await sessions.wait_for_idle(sid, turns=3)
        history = [t async for t in sessions.history(sid, page_size=2)]
    await store.close()
    # The two newest finished turns, then the active one, waiting for approval.
    assert [t.turn_id for t in waiting.turns] == ["turn-6", "turn-7", "turn-8"]
    assert waiting.turns[-1].status == "waiting_for_approval"
    assert waiting.turn_count == 8
    assert [m.text for m in waiting.messages if m.role == "user"] == [
        "say 5",
        "say 6",
        "say 7",
    ]
    assert [t.final_text for t in history] == [f"said: {n}" for n in range(7, 0, -1)]


async def test_a_full_queue_refuses_the_next_message_with_a_clear_error(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = "bounded-queue"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say first ;; pause held")
        for n in range(MAX_QUEUED_MESSAGES - 1):
            assert await sessions.send_user_message(sid, f"say queued {n}")
        with pytest.raises(UserError) as refused:
            await sessions.send_user_message(sid, "say one too many")
        (Path(config.gate_dir) / "held").write_text("")
        async with asyncio.timeout(60):
            snap = await sessions.wait_for_idle(sid)
            while snap.status != "idle":
                snap = await sessions.wait_for_idle(sid)
    await store.close()
    assert f"already has {MAX_QUEUED_MESSAGES} messages waiting" in str(refused.value)
    assert snap.turn_count == 2
    assert len(snap.turns[-1].prompts) == MAX_QUEUED_MESSAGES - 1


async def test_an_over_long_rejection_is_refused_and_a_recorded_one_is_clipped(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = _rig(client, tmp_path, flow_type)
    sid = f"bounded-rejection-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call create_refund {"orderId": "5"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        iid = interrupt.interrupt_id
        length = await settled_history_length(client, sid)
        # The client refuses it, on the Update and on the recorded path alike.
        for timeout in (None, 5):
            with pytest.raises(InvalidArgumentError) as refused:
                await sessions.resolve_interrupt(
                    sid,
                    iid,
                    approved=False,
                    rejection_message="r" * 1_500_000,
                    timeout=timeout,
                )
            assert refused.value.argument == "rejection_message"
            assert str(refused.value) == (
                "`rejection_message` is 1,500,000 characters long, over the limit of "
                "10,000; pass a shorter one: the model reads it as why the call was "
                "refused, and the session keeps it in its state"
            )
        # So does the Update's validator, for a caller past the client.
        handle = client.get_workflow_handle(sid)
        raw = {
            "interrupt_id": iid,
            "approved": False,
            "rejection_message": "r" * 10_001,
        }
        with pytest.raises(WorkflowUpdateFailedError) as past:
            await handle.execute_update("resolve_interrupt", raw, result_type=bool)
        assert isinstance(past.value.cause, ApplicationError)
        assert past.value.cause.type == INVALID_ARGUMENT
        assert past.value.cause.details == ("rejection_message",)
        # Nothing changed: no history, and the call still waits.
        assert await settled_history_length(client, sid) == length
        waiting = await sessions.snapshot(sid)
        assert waiting.status == "waiting_for_approval"
        assert [i.interrupt_id for i in waiting.pending_interrupts] == [iid]

        # A Signal has no validator: sent past the client, 1.5 MB is kept clipped
        # (whole, the state would pass Temporal's 2 MB limit and the task fail).
        signal = {**raw, "rejection_message": "s" * 1_500_000}
        await handle.signal("record_resolution", signal)
        async with asyncio.timeout(60):  # waiting for approval is idle too
            done = await sessions.wait_for_idle(sid)
            while done.status != "idle":
                await asyncio.sleep(0.05)
                done = await sessions.wait_for_idle(sid)
    await store.close()
    (record,) = done.turns[-1].tool_calls
    assert (done.status, record.status) == ("idle", "rejected")
    assert record.rejection_message == "s" * 9_999 + "…"


async def test_a_tool_that_raises_a_1_9_mb_error_ends_outcome_unknown_clipped(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    async def explode(args: JsonObject, execution: object) -> str:
        raise RuntimeError("e" * 1_900_000)

    flow = create_agent_session_flow(
        ScriptedRunner({"explode": explode}),
        flow_type,
        AgentSessionOptions(
            tool_policies={"explode": ToolPolicy(effect="idempotent_write")},
            retry_interval=timedelta(seconds=0.1),
        ),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = f"bounded-tool-error-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="call explode {}")
        done = await sessions.wait_for_idle(sid, timeout=60)
        # The session lives on: the next message is answered.
        async with asyncio.timeout(60):
            after = await sessions.send_and_wait(sid, "say still here")
        events = await sessions.events(sid)
        history = await _history(client, sid, (await _runs(client, sid))[-1])
    await store.close()
    (record,) = done.turns[-1].tool_calls
    assert (done.status, record.status) == ("idle", "outcome_unknown")
    assert record.output == "RuntimeError: " + "e" * 985 + "…"
    assert after.turns[-1].final_text == "said: still here"
    (finished,) = [
        e
        for e in events
        if e.type == "tool_call_finished" and e.data.get("tool_name") == "explode"
    ]
    assert finished.data["error"] == record.output
    # What the workflow sends on keeps the error clipped: the resumed segment's
    # input (its records) and every publish.
    scheduled = [
        e.ByteSize()
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert len(scheduled) >= 3 and max(scheduled) < 16 * 1024
    # The failure Temporal records for each attempt keeps its cause clipped too
    # (it held the tool's whole 1.9 MB text beside the clipped message).
    failed = [
        e.ByteSize()
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert failed and max(failed) < 16 * 1024


def test_an_activity_s_error_message_is_clipped_at_the_engine_edge() -> None:
    failure = _engine_error(RuntimeError("e" * 1_900_000), attempt=2)
    assert failure.message == "RuntimeError: " + "e" * 985 + "…"
    assert failure.type == "RuntimeError" and failure.details == ({"attempt": 2},)
    refused = _engine_error(MessageTooLargeError("m" * 1_900_000))
    assert refused.message == "m" * 999 + "…" and refused.non_retryable

"""The turn machine's transitions on plain data: no Temporal, no server, no clock.

Each test drives `dex_agents.session`'s pure functions the way the session
workflow does (ask `advance` for a Step, hand its result back) and checks the
exact state, events and Step that come out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from dex_agents.session import AgentEvent, AgentSessionOptions, ToolCall, ToolPolicy
from dex_agents.session._blob import BlobReference
from dex_agents.session._json import JsonObject
from dex_agents.session._media import ImageReference
from dex_agents.session._pending import (
    PendingItem,
    TurnFailureNote,
    UserPrompt,
    collapse_notes,
    failure_note,
)
from dex_agents.session._records import ToolCallEdit, ToolRecord
from dex_agents.session._state import (
    ActiveTurn,
    FinishedTurn,
    Interrupt,
    SessionInput,
    SessionState,
    TurnSummary,
    session_status,
)
from dex_agents.session._turns import (
    AwaitApprovalStep,
    CallToolStep,
    ContinueAsNewStep,
    OpenBudgetStep,
    OpenInterruptStep,
    PublishStep,
    Refusal,
    RunModelStep,
    SegmentResume,
    Transition,
    UpdateOutcome,
    advance,
    apply_resolution,
    approval_settled,
    calls_requested,
    cancel_turn,
    check_budget_answer,
    check_end,
    check_message,
    check_resolution,
    end_session,
    finish_session,
    has_work,
    model_answered,
    model_failed,
    model_step,
    open_interrupt,
    queue_message,
    record_outcome,
    record_unknown_outcome,
    request_cancel,
    session_finished,
    settle_approval,
    start_turn,
    starting_state,
    step_execution_id,
    waiting_call,
)
from dex_agents.session._usage import Usage

Change = Callable[[SessionState], "Transition | UpdateOutcome | SessionState"]
CARRIED = Path(__file__).parent.parent / "carried_states"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OPTIONS = AgentSessionOptions(interrupt_deadline=timedelta(minutes=5))
STATE_JSON = TypeAdapter(SessionState)
INPUT_JSON = TypeAdapter(SessionInput)
SUMMARY_JSON = TypeAdapter(TurnSummary)
IMAGE = ImageReference(media_type="image/png", key="abc.png", sha256="abc", size=3)
REF = BlobReference(blob_id="msg-abc", size=50_000, sha256="abc")
USAGE = Usage(input_tokens=20, output_tokens=5, model_calls=1, cost_usd=0.001)

READ = ToolCall(
    tool_call_id="call-read",
    tool_name="lookup_order",
    arguments={"orderId": "7"},
    policy=ToolPolicy(effect="read"),
)
REFUND = ToolCall(
    tool_call_id="call-refund",
    tool_name="create_refund",
    arguments={"orderId": "7"},
    policy=ToolPolicy(effect="non_idempotent_write"),
)
EMAIL = ToolCall(
    tool_call_id="call-email",
    tool_name="send_email",
    arguments={"to": "a@example.com"},
    policy=ToolPolicy(effect="non_idempotent_write"),
    reason="emails leave the building",
)


# ----- drivers: what the workflow does between transitions --------------------


def _retried_step(call: ToolCall, timeout: timedelta, *, attempts: int) -> CallToolStep:
    """The first turn's tool Step for `call`, retried up to `attempts`."""
    return CallToolStep(
        turn_id="turn-1",
        call=call,
        tool_step="call_tool",
        attempts=attempts,
        timeout=timeout,
    )


def _single_attempt_step(call: ToolCall, timeout: timedelta) -> CallToolStep:
    """The first turn's tool Step for `call`, which may run only once."""
    return CallToolStep(
        turn_id="turn-1",
        call=call,
        tool_step="call_single_attempt_tool",
        attempts=1,
        timeout=timeout,
    )


def queued(*texts: str, state: SessionState | None = None) -> SessionState:
    """`state` (a new session by default) with `texts` sent, one Update each."""
    state = state or starting_state(None, session_id="s1")
    for text in texts:
        outcome = queue_message(
            state,
            UserPrompt(text=text),
            update_id=f"send-{text}",
            images_supported=False,
        )
        assert outcome.answer
        state = outcome.state
    return state


def running(*texts: str) -> SessionState:
    """A session whose first turn sends `texts` and runs its first segment."""
    state = start_turn(queued(*texts)).state
    moved = advance(state, OPTIONS, now=NOW)
    assert isinstance(moved.step, RunModelStep)
    return moved.state


def at_calls(
    *calls: ToolCall, texts: tuple[str, ...] = ("refund order 7",)
) -> SessionState:
    """A running turn whose segment asked for `calls`."""
    return calls_requested(
        running(*texts),
        segment_id="turn-1/run_model/1/attempt-1",
        calls=calls,
        run_state={"script": "x"},
        usage=USAGE,
    ).state


def waiting(*calls: ToolCall) -> SessionState:
    """A turn waiting for approval of its first call (`intr-1`, opened at NOW)."""
    moved = advance(at_calls(*calls), OPTIONS, now=NOW)
    assert isinstance(moved.step, OpenInterruptStep)
    return open_interrupt(moved.state, OPTIONS, interrupt_id="intr-1", now=NOW).state


def resolved(
    state: SessionState, *, approved: bool, message: str | None = None
) -> SessionState:
    outcome = apply_resolution(
        state,
        interrupt_id="intr-1",
        approved=approved,
        rejection_message=message,
        update_id="resolve-1",
    )
    assert outcome.answer
    return outcome.state


def carried(state: SessionState) -> SessionState:
    """`state` through continue-as-new: JSON out of one run, into the next."""
    data = INPUT_JSON.dump_json(SessionInput(state=state))
    restored = INPUT_JSON.validate_json(data).state
    assert restored == state
    return starting_state(restored, session_id=state.session_id)


def turn(state: SessionState) -> ActiveTurn:
    """The active turn of `state` (there must be one)."""
    assert state.active is not None
    return state.active


def summary(turn: FinishedTurn) -> TurnSummary:
    return SUMMARY_JSON.validate_python(turn.summary)


def usage_json(usage: Usage) -> JsonObject:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "model_calls": usage.model_calls,
        "cost_usd": usage.cost_usd,
    }


# ----- a new turn ---------------------------------------------------------------


def test_queued_prompts_start_a_turn_that_sends_them_all() -> None:
    state = queued("one", "two")
    assert state.pending == [UserPrompt(text="one"), UserPrompt(text="two")]
    assert (state.inbox, state.version) == (2, 2)
    assert state.update_ids == ["send-one", "send-two"]
    assert has_work(state) and session_status(state) == "running"

    started = start_turn(state)

    assert started == Transition(
        state=replace(
            state,
            turn_counter=1,
            inbox=0,
            active=ActiveTurn(
                turn_id="turn-1", pending_count=2, prompts=["one", "two"]
            ),
        ),
        events=(AgentEvent(type="turn_started", data={"turn_id": "turn-1"}),),
    )
    moved = advance(started.state, OPTIONS, now=NOW)
    first = RunModelStep(
        turn_id="turn-1",
        segment=1,
        transcript_head=None,
        pending=(UserPrompt(text="one"), UserPrompt(text="two")),
    )
    assert moved.step == first
    assert step_execution_id(first) == "turn-1/run_model/1"
    assert moved.state.active == replace(turn(started.state), segment=1)
    assert moved.events == ()


def test_a_new_session_has_nothing_to_do_and_no_step() -> None:
    state = starting_state(None, session_id="s1")
    assert state == SessionState(session_id="s1")
    assert not has_work(state)
    assert session_status(state) == "idle"
    assert advance(state, OPTIONS, now=NOW) == Transition(state=state)


# ----- the model phase ----------------------------------------------------------


def test_an_answer_ends_the_turn_and_sends_its_summary_to_the_turn_log() -> None:
    state = running("hello")

    ended = model_answered(
        state, segment_id="turn-1/run_model/1/attempt-1", final_text="hi", usage=USAGE
    )

    assert ended.step == PublishStep()
    assert ended.events == (
        AgentEvent(type="turn_completed", data={"turn_id": "turn-1", "reruns": 0}),
    )
    assert ended.state == replace(
        state,
        active=None,
        pending=[],
        transcript_head="turn-1/run_model/1/attempt-1",
        usage=USAGE,
        unpublished=[
            FinishedTurn(
                number=1,
                summary={
                    "turn_id": "turn-1",
                    "status": "completed",
                    "prompts": ["hello"],
                    "final_text": "hi",
                    "tool_calls": [],
                    "usage": usage_json(USAGE),
                    "error": None,
                    "reruns": 0,
                },
            )
        ],
    )
    assert session_status(ended.state) == "idle"


def test_the_summary_clips_a_long_answer() -> None:
    ended = model_answered(
        running("hello"), segment_id="seg", final_text="x" * 5000, usage=USAGE
    )
    text = summary(ended.state.unpublished[0]).final_text
    assert text == "x" * 999 + "…"


def test_tool_calls_requested_start_the_tool_phase() -> None:
    state = running("refund order 7")

    moved = calls_requested(
        state,
        segment_id="turn-1/run_model/1/attempt-1",
        calls=[READ, REFUND],
        run_state={"script": "x"},
        usage=USAGE,
    )

    assert moved == Transition(
        state=replace(
            state,
            usage=USAGE,
            active=replace(
                turn(state),
                phase="tool",
                calls=[READ, REFUND],
                run_state={"script": "x"},
                partial_segment_id="turn-1/run_model/1/attempt-1",
                usage=USAGE,
            ),
        )
    )


def test_tool_calls_requested_without_calls_fail_the_turn() -> None:
    failed = calls_requested(
        running("hello"), segment_id="seg", calls=[], run_state={}, usage=USAGE
    )
    reason = "the runner requested tool calls but named none"
    assert failed.step == PublishStep()
    assert failed.events == (
        AgentEvent(
            type="turn_failed",
            data={"turn_id": "turn-1", "error": reason, "reruns": 0},
        ),
    )
    assert failed.state.usage == USAGE
    assert summary(failed.state.unpublished[0]).error == reason


def test_a_failed_segment_fails_the_turn_with_a_note_after_its_items() -> None:
    state = running("first")
    # A message that arrives while the turn runs waits for the next turn.
    state = queued("second", state=state)
    assert state.inbox == 1

    failed = model_failed(state, OPTIONS, error="SessionError: boom")

    note = failure_note("turn-1", "SessionError: boom", [])
    assert failed.step == PublishStep()
    assert failed.events == (
        AgentEvent(
            type="turn_failed",
            data={"turn_id": "turn-1", "error": "SessionError: boom", "reruns": 0},
        ),
    )
    assert failed.state == replace(
        state,
        active=None,
        pending=[UserPrompt(text="first"), note, UserPrompt(text="second")],
        unpublished=[
            FinishedTurn(
                number=1,
                summary={
                    "turn_id": "turn-1",
                    "status": "failed",
                    "prompts": ["first"],
                    "final_text": "",
                    "tool_calls": [],
                    "usage": usage_json(Usage()),
                    "error": "SessionError: boom",
                    "reruns": 0,
                },
            )
        ],
    )
    # The next turn sends the failed turn's items, the note, then the new message;
    # its summary shows only the new message.
    nxt = start_turn(failed.state).state
    assert nxt.active == ActiveTurn(
        turn_id="turn-2", pending_count=3, prompts=["second"]
    )
    assert nxt.inbox == 0


def test_a_timed_out_segment_says_which_limit_to_raise() -> None:
    failed = model_failed(
        running("hello"), OPTIONS, error="activity Heartbeat timeout", timed_out=True
    )
    assert failed.events[0].data["error"] == (
        "the model segment exceeded `run_model_limit` (0:15:00) or stopped "
        "heartbeating (activity Heartbeat timeout); raise the limit in the session options"
    )


def test_prompts_too_large_for_the_model_are_dropped_and_the_note_says_so() -> None:
    earlier = failure_note("turn-0", "earlier failure", [])
    state = starting_state(None, session_id="s1")
    state = queued("y" * 300, state=replace(state, pending=[earlier]))
    state = start_turn(state).state
    state = advance(state, OPTIONS, now=NOW).state
    assert state.active is not None and state.active.pending_count == 2

    failed = model_failed(
        state, OPTIONS, error="MessageTooLargeError: 413", too_large=True
    )

    note = failure_note("turn-1", "MessageTooLargeError: 413", [])
    dropped = repr("y" * 79 + "…")
    assert failed.state.pending == [
        earlier,
        TurnFailureNote(
            turn_id="turn-1",
            text=note.text
            + "\nIts 1 user message(s) were too large for the model and were not kept: "
            + dropped,
        ),
    ]
    assert failed.state.active is None


def test_a_spent_budget_fails_the_turn_in_histories_before_the_pause() -> None:
    options = AgentSessionOptions(spend_limit=0.01)
    state = start_turn(queued("hello")).state
    state = replace(state, usage=Usage(cost_usd=0.02))

    failed = advance(state, options, now=NOW, budget_pauses=False)

    reason = (
        "spend limit reached: 0.0200 USD of 0.0100 USD; raise `spend_limit` to continue"
    )
    assert failed.step == PublishStep()
    assert failed.events == (
        AgentEvent(
            type="turn_failed",
            data={"turn_id": "turn-1", "error": reason, "reruns": 0},
        ),
    )
    assert failed.state.active is None
    assert failed.state.pending == [
        UserPrompt(text="hello"),
        failure_note("turn-1", reason, []),
    ]


def test_the_spend_limit_is_reached_at_the_limit_itself() -> None:
    options = AgentSessionOptions(spend_limit=0.01)
    state = start_turn(queued("hello")).state
    below = advance(replace(state, usage=Usage(cost_usd=0.0099)), options, now=NOW)
    assert isinstance(below.step, RunModelStep)
    at = advance(replace(state, usage=Usage(cost_usd=0.01)), options, now=NOW)
    assert at.step == OpenBudgetStep()
    assert turn(at.state).segment == 0  # no segment started


# ----- the tool phase -----------------------------------------------------------


def test_a_call_without_approval_runs_in_a_retried_tool_step() -> None:
    state = at_calls(READ)

    moved = advance(state, OPTIONS, now=NOW)

    call = _retried_step(READ, timedelta(minutes=10), attempts=3)
    assert moved.step == call
    assert step_execution_id(call) == "turn-1/call_tool/call-read"
    assert moved.state.active == replace(turn(state), phase="execute")
    assert moved.events == ()


def test_a_tool_source_sets_the_attempts_and_limit_of_its_calls() -> None:
    sourced = replace(READ, step_attempts=5, step_timeout_seconds=30.0)
    write = replace(
        REFUND,
        policy=ToolPolicy(effect="non_idempotent_write"),
        step_attempts=5,
        step_timeout_seconds=30.0,
    )
    moved = advance(at_calls(sourced), OPTIONS, now=NOW)
    assert moved.step == _retried_step(sourced, timedelta(seconds=30), attempts=5)
    # A single-attempt Step stays single whatever the source asks for.
    state = resolved(waiting(write), approved=True)
    step = advance(settle_approval(state).state, OPTIONS, now=NOW).step
    assert step == _single_attempt_step(write, timedelta(seconds=30))


def test_a_call_that_needs_approval_opens_an_interrupt_with_a_deadline() -> None:
    state = at_calls(EMAIL, READ)

    moved = advance(state, OPTIONS, now=NOW)
    assert moved == Transition(state=state, step=OpenInterruptStep(call=EMAIL))

    opened = open_interrupt(state, OPTIONS, interrupt_id="intr-1", now=NOW)

    interrupt = Interrupt(
        interrupt_id="intr-1",
        turn_id="turn-1",
        tool_call_id="call-email",
        tool_name="send_email",
        arguments={"to": "a@example.com"},
        effect="non_idempotent_write",
        reason="emails leave the building",
        created_at="2026-12-01T12:00:00+00:00",
        deadline="2026-12-01T12:05:00+00:00",
    )
    assert opened == Transition(
        state=replace(
            state,
            interrupts={"intr-1": interrupt},
            active=replace(
                turn(state),
                phase="await_approval",
                interrupt_id="intr-1",
            ),
        ),
        events=(
            AgentEvent(
                type="interrupt_created",
                data={
                    "interrupt_id": "intr-1",
                    "tool_call_id": "call-email",
                    "tool_name": "send_email",
                    "arguments": {"to": "a@example.com"},
                    "arguments_ref": None,
                    "effect": "non_idempotent_write",
                    "at_least_once": False,
                    "deadline": "2026-12-01T12:05:00+00:00",
                },
            ),
        ),
        step=PublishStep(),
    )
    assert session_status(opened.state) == "waiting_for_approval"
    # The wait lasts until the deadline, counted from whenever it (re)starts.
    later = advance(opened.state, OPTIONS, now=NOW + timedelta(minutes=1))
    assert later == Transition(
        state=opened.state,
        step=AwaitApprovalStep(interrupt_id="intr-1", timeout=timedelta(minutes=4)),
    )


def test_an_interrupt_without_a_deadline_waits_without_a_timeout() -> None:
    moved = advance(at_calls(REFUND), AgentSessionOptions(), now=NOW)
    assert moved.step == OpenInterruptStep(call=REFUND)
    opened = open_interrupt(
        moved.state, AgentSessionOptions(), interrupt_id="intr-1", now=NOW
    )
    assert opened.state.interrupts["intr-1"].reason == (
        "create_refund is non_idempotent_write"
    )
    assert opened.state.interrupts["intr-1"].deadline is None
    assert advance(opened.state, OPTIONS, now=NOW).step == AwaitApprovalStep(
        interrupt_id="intr-1", timeout=None
    )


def test_an_approved_call_goes_to_execute() -> None:
    state = waiting(REFUND)
    assert not approval_settled(state, "intr-1")

    state = resolved(state, approved=True)
    assert approval_settled(state, "intr-1")
    assert state.update_ids[-1] == "resolve-1"

    settled = settle_approval(state)

    assert settled == Transition(
        state=replace(state, active=replace(turn(state), phase="execute")),
        events=(
            AgentEvent(
                type="interrupt_resolved",
                data={
                    "interrupt_id": "intr-1",
                    "approved": True,
                    "rejection_message": None,
                    "resolved_by": None,
                },
            ),
        ),
        step=PublishStep(),
    )
    execute = _single_attempt_step(REFUND, timedelta(minutes=10))
    assert advance(settled.state, OPTIONS, now=NOW).step == execute
    assert step_execution_id(execute) == "turn-1/call_single_attempt_tool/call-refund"


def test_a_rejected_call_is_recorded_and_the_rest_of_its_reply_is_skipped() -> None:
    state = resolved(waiting(REFUND, READ), approved=False, message="not now")

    settled = settle_approval(state)

    rejected = ToolRecord(
        tool_call_id="call-refund",
        tool_name="create_refund",
        arguments={"orderId": "7"},
        status="rejected",
        rejection_message="not now",
    )
    assert settled.step == PublishStep()
    assert settled.events == (
        AgentEvent(
            type="interrupt_resolved",
            data={
                "interrupt_id": "intr-1",
                "approved": False,
                "rejection_message": "not now",
                "resolved_by": None,
            },
        ),
        AgentEvent(
            type="tool_call_finished",
            data={
                "tool_call_id": "call-refund",
                "tool_name": "create_refund",
                "status": "rejected",
                "output": "",
                "output_ref": None,
                "error": None,
                "rejection_message": "not now",
                "attempts": 0,
            },
        ),
    )
    assert settled.state.active == replace(
        turn(state),
        phase="tool",
        call_index=1,
        interrupt_id=None,
        records=[rejected],
        turn_records=[rejected],
    )

    resumed = advance(settled.state, OPTIONS, now=NOW)

    skipped = ToolRecord(
        tool_call_id="call-read",
        tool_name="lookup_order",
        arguments={"orderId": "7"},
        status="skipped",
    )
    assert resumed.step == RunModelStep(
        turn_id="turn-1",
        segment=2,
        transcript_head=None,
        pending=(UserPrompt(text="refund order 7"),),
        resume=SegmentResume(
            run_state={"script": "x"},
            partial_segment_id="turn-1/run_model/1/attempt-1",
            records=(rejected, skipped),
        ),
    )
    assert resumed.state.active is not None
    assert resumed.state.active.phase == "resume"
    assert resumed.state.active.turn_records == [rejected, skipped]
    # The skipped call's outcome is an event too.
    assert [(e.type, e.data["status"]) for e in resumed.events] == [
        ("tool_call_finished", "skipped")
    ]


def test_a_caller_given_name_is_bounded_in_the_state() -> None:
    long_name = "x" * 20_000
    approving = apply_resolution(
        waiting(REFUND),
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="resolve-long",
        resolved_by=long_name,
    )
    kept = approving.state.interrupts["intr-1"].resolved_by or ""
    assert len(kept) == 200 and kept.endswith("…")


def test_who_resolved_a_call_is_on_the_interrupt_the_record_and_the_event() -> None:
    approving = apply_resolution(
        waiting(REFUND),
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="resolve-alice",
        resolved_by="alice",
    )
    assert approving.answer
    assert approving.state.interrupts["intr-1"].resolved_by == "alice"
    settled = settle_approval(approving.state)
    assert settled.events[0].type == "interrupt_resolved"
    assert settled.events[0].data["resolved_by"] == "alice"
    (record,) = turn(
        record_outcome(
            advance(settled.state, OPTIONS, now=NOW).state, output="refunded"
        ).state
    ).records
    assert (record.status, record.resolved_by) == ("finished", "alice")
    # A repeat by someone else changes nothing: the first answer's maker stays.
    repeat = apply_resolution(
        approving.state,
        interrupt_id="intr-1",
        approved=False,
        rejection_message="no",
        update_id="resolve-bob",
        resolved_by="bob",
    )
    assert not repeat.answer
    assert repeat.state.interrupts["intr-1"].resolved_by == "alice"

    rejecting = apply_resolution(
        waiting(REFUND),
        interrupt_id="intr-1",
        approved=False,
        rejection_message="not this order",
        update_id="resolve-bob",
        resolved_by="bob",
    )
    rejected = settle_approval(rejecting.state)
    assert rejected.events[0].data["resolved_by"] == "bob"
    (record,) = turn(rejected.state).records
    assert (record.status, record.resolved_by) == ("rejected", "bob")
    assert record.rejection_message == "not this order"
    # Carried through continue-as-new with the state.
    assert carried(rejecting.state).interrupts["intr-1"].resolved_by == "bob"


def test_a_deadline_that_passes_expires_the_call_rather_than_rejecting_it() -> None:
    state = waiting(REFUND)
    past = advance(state, OPTIONS, now=NOW + timedelta(minutes=6))
    assert past.step == AwaitApprovalStep(interrupt_id="intr-1", timeout=timedelta(0))

    settled = settle_approval(state, timed_out=True)

    message = "no approval arrived before the deadline"
    assert settled.step == PublishStep()
    assert settled.state.interrupts["intr-1"] == replace(
        state.interrupts["intr-1"],
        resolved=True,
        approved=False,
        expired=True,
        rejection_message=message,
    )
    assert settled.state.active is not None
    record = ToolRecord(
        tool_call_id="call-refund",
        tool_name="create_refund",
        arguments={"orderId": "7"},
        status="expired",
        rejection_message=message,
    )
    assert settled.state.active.records == [record]
    assert settled.events[0].data == {
        "interrupt_id": "intr-1",
        "approved": False,
        "rejection_message": message,
        "resolved_by": None,
        "expired": True,
    }
    # The model is told nobody refused it, not that the user rejected it.
    assert "expired" in record.model_text
    assert "rejected" not in record.model_text


def test_a_resolution_that_landed_before_the_timeout_is_not_expired() -> None:
    state = waiting(REFUND)
    approved = apply_resolution(
        state,
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="u",
    ).state

    settled = settle_approval(approved, timed_out=True)

    assert turn(settled.state).phase == "execute"
    assert not settled.state.interrupts["intr-1"].expired


def test_a_tool_result_is_recorded_with_its_output_reference() -> None:
    state = advance(at_calls(READ, REFUND), OPTIONS, now=NOW).state
    ref = BlobReference(blob_id="out-abc", size=50_000, sha256="abc")
    image = ImageReference(media_type="image/png", key="def.png", sha256="def", size=10)

    recorded = record_outcome(
        state, output="a preview…", output_ref=ref, images=[image], attempts=2
    )

    record = ToolRecord(
        tool_call_id="call-read",
        tool_name="lookup_order",
        arguments={"orderId": "7"},
        status="finished",
        output="a preview…",
        output_ref=ref,
        images=(image,),
        attempts=2,
    )
    assert recorded == Transition(
        state=replace(
            state,
            active=replace(
                turn(state),
                phase="tool",
                call_index=1,
                records=[record],
                turn_records=[record],
            ),
        )
    )
    # The next call of the reply is up next.
    assert advance(recorded.state, OPTIONS, now=NOW).step == OpenInterruptStep(
        call=REFUND
    )


def test_a_tool_that_reports_an_error_is_recorded_failed() -> None:
    state = advance(at_calls(READ), OPTIONS, now=NOW).state
    recorded = record_outcome(
        state, output="no such order", is_error=True, finished_by_resumed_turn=True
    )
    assert recorded.state.active is not None
    assert recorded.state.active.records == [
        ToolRecord(
            tool_call_id="call-read",
            tool_name="lookup_order",
            arguments={"orderId": "7"},
            status="failed",
            output="no such order",
            finished_by_resumed_turn=True,
        )
    ]


def test_a_failed_tool_step_has_an_unknown_outcome_and_skips_the_rest() -> None:
    second = replace(READ, tool_call_id="call-read-2")
    state = advance(at_calls(READ, second), OPTIONS, now=NOW).state

    recorded = record_unknown_outcome(state, error="worker lost", attempts=3)
    assert recorded.step is None
    assert recorded.events == (
        AgentEvent(
            type="tool_call_finished",
            data={
                "tool_call_id": "call-read",
                "tool_name": "lookup_order",
                "status": "outcome_unknown",
                "output": "",
                "output_ref": None,
                "error": "worker lost",
                "rejection_message": None,
                "attempts": 3,
            },
        ),
    )

    unknown = ToolRecord(
        tool_call_id="call-read",
        tool_name="lookup_order",
        arguments={"orderId": "7"},
        status="outcome_unknown",
        output="worker lost",
        attempts=3,
    )
    assert recorded.state.active is not None
    assert recorded.state.active.records == [unknown]
    resumed = advance(recorded.state, OPTIONS, now=NOW)
    assert isinstance(resumed.step, RunModelStep)
    assert resumed.step.resume is not None
    assert [r.status for r in resumed.step.resume.records] == [
        "outcome_unknown",
        "skipped",
    ]


def test_when_every_call_is_done_the_model_resumes_with_the_records() -> None:
    state = advance(at_calls(READ), OPTIONS, now=NOW).state
    state = record_outcome(state, output="order 7: shipped").state

    resumed = advance(state, OPTIONS, now=NOW)

    record = ToolRecord(
        tool_call_id="call-read",
        tool_name="lookup_order",
        arguments={"orderId": "7"},
        status="finished",
        output="order 7: shipped",
    )
    assert resumed == Transition(
        state=replace(
            state,
            active=replace(turn(state), phase="resume", segment=2),
        ),
        step=RunModelStep(
            turn_id="turn-1",
            segment=2,
            transcript_head=None,
            pending=(UserPrompt(text="refund order 7"),),
            resume=SegmentResume(
                run_state={"script": "x"},
                partial_segment_id="turn-1/run_model/1/attempt-1",
                records=(record,),
            ),
        ),
    )
    assert isinstance(resumed.step, RunModelStep)
    assert step_execution_id(resumed.step) == "turn-1/run_model/2"


def test_a_turn_that_ends_takes_its_interrupts_into_the_resolved_window() -> None:
    state = settle_approval(resolved(waiting(REFUND), approved=True)).state
    state = advance(state, OPTIONS, now=NOW).state
    state = record_outcome(state, output="refunded").state
    state = advance(state, OPTIONS, now=NOW).state

    ended = model_answered(state, segment_id="seg-2", final_text="done", usage=USAGE)

    assert ended.state.interrupts == {}
    assert ended.state.resolved_interrupts == ["intr-1"]
    assert summary(ended.state.unpublished[0]) == TurnSummary(
        turn_id="turn-1",
        status="completed",
        prompts=["refund order 7"],
        final_text="done",
        tool_calls=[
            ToolRecord(
                tool_call_id="call-refund",
                tool_name="create_refund",
                arguments={"orderId": "7"},
                status="finished",
                output="refunded",
            )
        ],
        usage=USAGE + USAGE,
    )
    # A late repeat of the resolve is known (not refused) and answers False.
    assert check_resolution(ended.state, "intr-1") is None
    late = apply_resolution(
        ended.state,
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="resolve-late",
    )
    assert late == UpdateOutcome(state=ended.state, answer=False)


def test_the_resolved_interrupt_window_keeps_the_latest_200() -> None:
    state = waiting(REFUND)
    state = replace(state, resolved_interrupts=[f"old-{i}" for i in range(200)])
    state = settle_approval(resolved(state, approved=False)).state
    state = advance(state, OPTIONS, now=NOW).state

    ended = model_answered(state, segment_id="seg-2", final_text="ok", usage=USAGE)

    assert ended.state.resolved_interrupts == [
        *(f"old-{i}" for i in range(1, 200)),
        "intr-1",
    ]


def test_messages_queued_during_a_turn_wait_for_the_next_turn() -> None:
    state = queued("during", state=running("first"))
    assert state.active is not None and state.active.pending_count == 1
    assert state.pending[-1] == UserPrompt(text="during")

    ended = model_answered(state, segment_id="seg", final_text="a", usage=USAGE)

    assert ended.state.pending == [UserPrompt(text="during")]
    assert ended.state.inbox == 1
    assert has_work(ended.state)
    assert session_status(ended.state) == "running"
    nxt = start_turn(ended.state).state
    assert nxt.active == ActiveTurn(
        turn_id="turn-2", pending_count=1, prompts=["during"]
    )
    step = advance(nxt, OPTIONS, now=NOW).step
    assert step == RunModelStep(
        turn_id="turn-2",
        segment=1,
        transcript_head="seg",
        pending=(UserPrompt(text="during"),),
    )


# ----- continue-as-new ----------------------------------------------------------


def test_continue_as_new_while_an_approval_waits_picks_up_the_same_interrupt() -> None:
    state = waiting(REFUND, READ)

    # Temporal suggests continue-as-new while nobody answers.
    wait = settle_approval(state)
    assert wait == Transition(state=state, step=ContinueAsNewStep())

    after = carried(wait.state)

    assert after == replace(state, runs=2)
    assert session_status(after) == "waiting_for_approval"
    later = NOW + timedelta(minutes=2)
    assert advance(after, OPTIONS, now=later) == Transition(
        state=after,
        step=AwaitApprovalStep(interrupt_id="intr-1", timeout=timedelta(minutes=3)),
    )
    # The approval reaches the new run and the turn goes on where it was.
    settled = settle_approval(resolved(after, approved=True))
    assert settled.state.active is not None
    assert settled.state.active.phase == "execute"
    assert advance(settled.state, OPTIONS, now=later).step == _single_attempt_step(
        REFUND, timedelta(minutes=10)
    )


def test_a_message_retried_across_continue_as_new_is_queued_once() -> None:
    state = queued("hello")
    after = carried(state)

    retry = queue_message(
        after, UserPrompt(text="hello"), update_id="send-hello", images_supported=False
    )

    assert retry == UpdateOutcome(state=after, answer=True)
    assert retry.state.pending == [UserPrompt(text="hello")]
    assert retry.state.inbox == 1


def test_a_resolve_retried_across_continue_as_new_answers_already_applied() -> None:
    state = resolved(waiting(REFUND), approved=True)
    after = carried(state)

    retry = apply_resolution(
        after,
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="resolve-1",
    )
    assert retry == UpdateOutcome(state=after, answer=True)
    # Another request for the same interrupt is a repeat: False, nothing changes.
    other = apply_resolution(
        after,
        interrupt_id="intr-1",
        approved=False,
        rejection_message="no",
        update_id="resolve-2",
    )
    assert other == UpdateOutcome(state=after, answer=False)


def test_the_update_id_window_keeps_the_latest_500() -> None:
    state = starting_state(None, session_id="s1")
    for i in range(600):
        state = queue_message(
            state, UserPrompt(text=f"m{i}"), update_id=f"u{i}", images_supported=False
        ).state
    assert state.update_ids == [f"u{i}" for i in range(100, 600)]
    # An Update without an ID (sent outside an Update handler) is never deduplicated.
    again = queue_message(
        state, UserPrompt(text="x"), update_id=None, images_supported=False
    )
    assert again.state.update_ids == state.update_ids
    assert len(again.state.pending) == 601


# ----- Update validation --------------------------------------------------------


def test_the_queue_holds_at_most_100_messages() -> None:
    state = queued(*(f"m{i}" for i in range(99)))
    # Failure notes do not count against the cap.
    state = replace(state, pending=[failure_note("turn-0", "x", []), *state.pending])
    assert check_message(state, UserPrompt(text="one more")) is None

    full = queued("m99", state=state)

    assert check_message(full, UserPrompt(text="one more")) == Refusal(
        reason="queue_full",
        message="session 's1' already has 100 messages waiting for a turn (the most "
        "it queues); wait until it answers (`wait_for_idle`) and send this message again",
    )


def test_a_message_needs_text_images_or_a_reference() -> None:
    state = starting_state(None, session_id="s1")
    assert check_message(state, UserPrompt(text="  ")) == (
        Refusal(
            reason="invalid_message",
            message="user message text must be a non-empty string, got '  '",
        )
    )
    assert check_message(state, UserPrompt(text="", images=(IMAGE,))) is None
    assert check_message(state, UserPrompt(text="", text_ref=REF)) is None


def test_a_long_message_must_travel_by_reference() -> None:
    state = starting_state(None, session_id="s1")
    text = "é" * 1025  # 2,050 bytes
    assert check_message(state, UserPrompt(text=text)) == (
        Refusal(
            reason="invalid_message",
            message="a user message of 2050 bytes must travel by reference (more than "
            "2048 bytes inline); send it with `SessionClient.send_user_message`, "
            "which stores it first",
        )
    )
    # By reference, the text is the preview the client made.
    assert check_message(state, UserPrompt(text=text[:200], text_ref=REF)) is None


def test_a_message_by_reference_carries_only_a_preview_as_its_text() -> None:
    # A raw Update (`temporal workflow update`) could send any `text_ref` with
    # megabytes of "preview", which the state and every RunModel input would hold.
    state = starting_state(None, session_id="s1")
    refusal = check_message(state, UserPrompt(text="x" * 1_900_000, text_ref=REF))
    assert refusal == Refusal(
        reason="invalid_message",
        message="a user message by reference carries a preview of at most 200 "
        "characters as its text, got 1,900,000; send it with "
        "`SessionClient.send_user_message`, which stores it and makes the preview",
    )
    assert check_message(state, UserPrompt(text="x" * 201, text_ref=REF)) is not None
    assert check_message(state, UserPrompt(text="x" * 200, text_ref=REF)) is None


def test_images_the_runner_cannot_send_are_refused_without_queueing() -> None:
    state = starting_state(None, session_id="s1")
    image = ImageReference(media_type="image/png", key="abc.png", sha256="abc", size=3)
    prompt = UserPrompt(text="look", images=(image,))

    refused = queue_message(state, prompt, update_id="u1", images_supported=False)
    assert refused == UpdateOutcome(state=state, answer=False)

    accepted = queue_message(state, prompt, update_id="u1", images_supported=True)
    assert accepted.answer
    assert accepted.state.pending == [prompt]


def test_an_unknown_interrupt_is_refused() -> None:
    state = waiting(REFUND)
    assert check_resolution(state, "intr-1") is None
    assert check_resolution(state, "intr-x") == Refusal(
        reason="unknown_interrupt",
        message="session 's1' has no interrupt 'intr-x'; pending interrupts: ['intr-1']",
    )


# ----- carried states -----------------------------------------------------------


def test_a_state_carried_by_0_1_0_waiting_for_approval_migrates() -> None:
    data = (CARRIED / "waiting_for_approval.0.1.0.json").read_bytes()
    carried_input = INPUT_JSON.validate_json(data)
    assert carried_input.state is not None
    assert len(carried_input.state.turns) == 3

    state = starting_state(carried_input.state, session_id="legacy-waiting")

    assert state.runs == 4
    assert state.turns == []
    assert [t.number for t in state.unpublished] == [1, 2]
    assert [summary(t).final_text for t in state.unpublished] == [
        "said: warm up",
        "said: second turn",
    ]
    assert state.active is not None
    assert state.active.prompts == ['call create_refund {"orderId": "4"}']
    assert state.active.usage == Usage(
        input_tokens=20, output_tokens=5, model_calls=1, cost_usd=0.001
    )
    assert list(state.interrupts) == ["intr_a239e66caaa1422d"]
    assert state.resolved_interrupts == []
    assert advance(state, OPTIONS, now=NOW) == Transition(
        state=state,
        step=AwaitApprovalStep(interrupt_id="intr_a239e66caaa1422d", timeout=None),
    )
    # A state of this release goes through continue-as-new unchanged.
    assert carried(state) == replace(state, runs=5)


def test_a_state_carried_by_0_1_0_idle_drops_the_interrupts_of_ended_turns() -> None:
    data = (CARRIED / "idle_after_failure.0.1.0.json").read_bytes()
    carried_input = INPUT_JSON.validate_json(data)
    assert carried_input.state is not None

    state = starting_state(carried_input.state, session_id="legacy-idle")

    assert state.interrupts == {}
    assert state.resolved_interrupts == ["intr_c04659ed700f473b"]
    assert [t.number for t in state.unpublished] == [1, 2, 3, 4, 5, 6]
    assert summary(state.unpublished[4]).tool_calls == [
        ToolRecord(
            tool_call_id="call_turn-5_0",
            tool_name="create_refund",
            arguments={"orderId": "5"},
            status="rejected",
            rejection_message="not now",
        )
    ]
    assert session_status(state) == "idle"
    assert not has_work(state)
    # The failed turn's prompt and note go with the next message.
    nxt = start_turn(queued("again", state=state)).state
    assert nxt.active == ActiveTurn(
        turn_id="turn-7", pending_count=3, prompts=["again"]
    )


# ----- purity -------------------------------------------------------------------


def _approved(state: SessionState) -> SessionState:
    return resolved(state, approved=True)


PHASE_CHANGES: dict[str, tuple[Callable[[], SessionState], Change]] = {
    "start_turn": (lambda: queued("x"), start_turn),
    "advance to execute": (
        lambda: at_calls(READ),
        lambda s: advance(s, OPTIONS, now=NOW),
    ),
    "advance to resume": (
        lambda: (
            record_outcome(
                advance(at_calls(READ), OPTIONS, now=NOW).state, output="o"
            ).state
        ),
        lambda s: advance(s, OPTIONS, now=NOW),
    ),
    "calls_requested": (
        lambda: running("x"),
        lambda s: calls_requested(
            s, segment_id="g", calls=[READ], run_state={}, usage=USAGE
        ),
    ),
    "model_answered": (
        lambda: running("x"),
        lambda s: model_answered(s, segment_id="g", final_text="a", usage=USAGE),
    ),
    "model_failed": (
        lambda: running("x"),
        lambda s: model_failed(s, OPTIONS, error="e", too_large=True),
    ),
    "open_interrupt": (
        lambda: at_calls(REFUND),
        lambda s: open_interrupt(s, OPTIONS, interrupt_id="i", now=NOW),
    ),
    "settle_approval": (lambda: _approved(waiting(REFUND)), settle_approval),
    "settle by deadline": (
        lambda: waiting(REFUND),
        lambda s: settle_approval(s, timed_out=True),
    ),
    "record_outcome": (
        lambda: advance(at_calls(READ), OPTIONS, now=NOW).state,
        lambda s: record_outcome(s, output="o"),
    ),
    "record_unknown_outcome": (
        lambda: advance(at_calls(READ), OPTIONS, now=NOW).state,
        lambda s: record_unknown_outcome(s, error="e"),
    ),
    "queue_message": (
        lambda: running("x"),
        lambda s: queue_message(
            s, UserPrompt(text="y"), update_id="u", images_supported=False
        ),
    ),
    "apply_resolution": (lambda: waiting(REFUND), _approved),
    "end_session": (
        lambda: waiting(REFUND),
        lambda s: end_session(s, reason="r", update_id="end-1"),
    ),
}


@pytest.mark.parametrize("name", list(PHASE_CHANGES))
def test_transitions_never_change_the_state_they_are_given(name: str) -> None:
    build, change = PHASE_CHANGES[name]
    given = build()
    before = copy.deepcopy(given)

    after = change(given)

    assert given == before
    new_state = after if isinstance(after, SessionState) else after.state
    assert new_state != before


# ----- rerun turns, honest cards, expired approvals -----------------------------


def test_a_segment_that_answered_on_a_later_attempt_marks_its_turn_rerun() -> None:
    state = calls_requested(
        running("refund order 7"),
        segment_id="turn-1/run_model/1/attempt-2",
        calls=[READ],
        run_state={},
        usage=USAGE,
        attempt=2,
    ).state
    assert turn(state).reruns == 1
    state = record_outcome(advance(state, OPTIONS, now=NOW).state, output="o").state
    state = advance(state, OPTIONS, now=NOW).state

    ended = model_answered(
        state,
        segment_id="turn-1/run_model/2/attempt-3",
        final_text="done",
        usage=USAGE,
        attempt=3,
    )

    assert ended.events == (
        AgentEvent(type="turn_completed", data={"turn_id": "turn-1", "reruns": 3}),
    )
    assert summary(ended.state.unpublished[0]).reruns == 3


def test_a_first_attempt_or_an_unknown_one_is_no_rerun() -> None:
    for attempt in (0, 1):
        ended = model_answered(
            running("hi"), segment_id="s", final_text="", usage=USAGE, attempt=attempt
        )
        assert summary(ended.state.unpublished[0]).reruns == 0


def test_a_segment_that_failed_after_retries_marks_its_failed_turn_rerun() -> None:
    failed = model_failed(running("hi"), OPTIONS, error="boom", attempts=3)
    assert failed.events[0].data["reruns"] == 2
    assert summary(failed.state.unpublished[0]).reruns == 2


def test_an_interrupt_of_a_cli_tool_says_it_runs_at_least_once() -> None:
    bash = ToolCall(
        tool_call_id="call-bash",
        tool_name="Bash",
        arguments={"command": "echo hi"},
        policy=ToolPolicy(effect="unclassified"),
        metadata={"kind": "cli", "claude_tool_name": "Bash"},
    )
    cli = waiting(bash)
    assert cli.interrupts["intr-1"].at_least_once
    own_step = waiting(REFUND)
    assert not own_step.interrupts["intr-1"].at_least_once

    moved = advance(at_calls(bash), OPTIONS, now=NOW)
    opened = open_interrupt(moved.state, OPTIONS, interrupt_id="intr-1", now=NOW)
    assert opened.events[0].data["at_least_once"] is True


def test_an_expired_approval_is_a_tool_outcome_event_of_its_own() -> None:
    settled = settle_approval(waiting(REFUND), timed_out=True)
    finished = settled.events[-1]
    assert finished.type == "tool_call_finished"
    assert finished.data["status"] == "expired"
    assert (
        finished.data["rejection_message"] == "no approval arrived before the deadline"
    )
    assert turn(settled.state).records[0].status == "expired"


# ----- ending a session ---------------------------------------------------------


def test_an_idle_session_ends_at_once_and_its_run_may_finish() -> None:
    state = model_answered(
        running("hi"), segment_id="s", final_text="hi", usage=USAGE
    ).state
    assert check_end(state, force=False) is None

    outcome = end_session(state, reason="done with it", update_id="end-1")

    assert outcome.answer
    ended = outcome.state
    assert (ended.end_requested, ended.end_reason) == (True, "done with it")
    assert ended.update_ids[-1] == "end-1"
    assert session_status(ended) == "ended"
    assert session_finished(ended) and not has_work(ended)
    assert finish_session(ended) == Transition(
        state=ended,
        events=(AgentEvent(type="session_ended", data={"reason": "done with it"}),),
        step=PublishStep(),
    )


def test_ending_twice_answers_false_and_a_retry_of_the_same_update_true() -> None:
    ended = end_session(running("x"), reason="", update_id="end-1").state
    assert not end_session(ended, reason="again", update_id="end-2").answer
    assert end_session(ended, reason="", update_id="end-1").answer
    assert end_session(ended, reason="again", update_id="end-2").state is ended
    assert check_end(ended, force=False) is None


def test_work_in_progress_refuses_an_end_without_force() -> None:
    cases = {
        "running turn-1": running("x"),
        "waiting for approval of ['intr-1']": waiting(REFUND),
        "holding 2 queued message(s)": queued("a", "b"),
    }
    for busy, state in cases.items():
        refusal = check_end(state, force=False)
        assert refusal is not None and refusal.reason == "session_busy", busy
        assert busy in refusal.message
        assert "force=True" in refusal.message
        assert check_end(state, force=True) is None


def test_a_forced_end_rejects_approvals_and_the_turn_stops_before_its_next_step() -> (
    None
):
    state = queued("later", state=waiting(REFUND, READ))
    assert state.inbox == 1

    ended = end_session(state, reason="closing", update_id="end-1").state

    interrupt = ended.interrupts["intr-1"]
    assert (interrupt.resolved, interrupt.approved) == (True, False)
    assert interrupt.rejection_message == "the session ended: closing"
    # The queued message is dropped; the running turn's own prompt stays its own.
    assert ended.pending == [UserPrompt(text="refund order 7")] and ended.inbox == 0
    assert session_status(ended) == "waiting_for_approval"  # until the turn stops

    settled = settle_approval(ended)
    assert [e.data.get("status") for e in settled.events] == [None, "rejected"]
    stopped = advance(settled.state, OPTIONS, now=NOW)

    error = "the session ended before this turn finished: closing"
    assert stopped.step == PublishStep()
    assert stopped.events == (
        AgentEvent(
            type="turn_failed",
            data={"turn_id": "turn-1", "error": error, "reruns": 0},
        ),
    )
    done = summary(stopped.state.unpublished[0])
    assert (done.status, done.error) == ("failed", error)
    # The reply's other call never ran, and no segment follows.
    assert [r.status for r in done.tool_calls] == ["rejected"]
    assert session_finished(stopped.state)
    assert session_status(stopped.state) == "ended"


def test_a_forced_end_stops_a_running_turn_after_its_step() -> None:
    state = advance(at_calls(READ, REFUND), OPTIONS, now=NOW).state
    ended = end_session(state, reason="", update_id="end-1").state
    # The tool Step in flight finishes; then nothing else of the turn runs.
    recorded = record_outcome(ended, output="order 7").state

    stopped = advance(recorded, OPTIONS, now=NOW)

    assert stopped.step == PublishStep()
    assert stopped.events[0].data["error"] == (
        "the session ended before this turn finished"
    )
    assert [r.status for r in summary(stopped.state.unpublished[0]).tool_calls] == [
        "finished"
    ]


def test_an_ended_session_refuses_messages_and_resolutions() -> None:
    state = waiting(REFUND)
    ended = end_session(state, reason="closing", update_id="end-1").state
    for refusal in (
        check_message(ended, UserPrompt(text="hello?")),
        check_resolution(ended, "intr-1"),
    ):
        assert refusal is not None
        assert refusal.reason == "session_ended"
        assert "'s1' has ended (closing)" in refusal.message
        assert "another ID" in refusal.message


def test_an_ending_state_survives_continue_as_new() -> None:
    ended = end_session(waiting(REFUND), reason="r", update_id="end-1").state
    assert carried(ended) == replace(ended, runs=ended.runs + 1)


# ----- approving with an edited input ---------------------------------------------


def test_an_edited_approval_runs_the_edited_call_and_keeps_the_original() -> None:
    state = waiting(REFUND, EMAIL)
    edited = replace(REFUND, arguments={"orderId": "8"})
    assert waiting_call(state, "intr-1") == REFUND

    outcome = apply_resolution(
        state,
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="edit-1",
        resolved_by="ana",
        edited_call=edited,
    )

    assert outcome.answer
    assert waiting_call(outcome.state, "intr-1") is None  # resolved now
    settled = settle_approval(outcome.state)
    step = advance(settled.state, OPTIONS, now=NOW).step
    assert isinstance(step, CallToolStep)
    assert step.call.arguments == {"orderId": "8"}  # what runs is the edit
    assert step.call.edit == ToolCallEdit(
        original_arguments={"orderId": "7"}, edited_by="ana"
    )
    assert settled.events[0].data == {
        "interrupt_id": "intr-1",
        "approved": True,
        "rejection_message": None,
        "resolved_by": "ana",
        "edited_arguments": {"orderId": "8"},
        "original_arguments": {"orderId": "7"},
        "edited_by": "ana",
    }
    recorded = record_outcome(
        advance(settled.state, OPTIONS, now=NOW).state, output="r-8"
    )
    record = turn(recorded.state).records[0]
    assert (record.arguments, record.edit) == ({"orderId": "8"}, step.call.edit)
    assert record.model_text.startswith("r-8")
    assert 'it ran with: {"orderId": "8"}' in record.model_text
    # The record keeps both inputs through continue-as-new.
    assert turn(carried(recorded.state)).records[0] == record


def test_an_edit_with_a_rejection_is_ignored_and_a_repeat_changes_nothing() -> None:
    state = waiting(REFUND)
    edited = replace(REFUND, arguments={"orderId": "8"})
    rejected = apply_resolution(
        state,
        interrupt_id="intr-1",
        approved=False,
        rejection_message="no",
        update_id="r-1",
        edited_call=edited,
    ).state
    assert turn(rejected).calls[0] == REFUND

    again = apply_resolution(
        rejected,
        interrupt_id="intr-1",
        approved=True,
        rejection_message=None,
        update_id="r-2",
        edited_call=edited,
    )
    assert (again.answer, again.state) == (False, rejected)


def test_a_call_after_an_expired_one_in_the_same_reply_is_skipped() -> None:
    settled = settle_approval(waiting(REFUND, EMAIL), timed_out=True)
    moved = advance(settled.state, OPTIONS, now=NOW)
    statuses = [r.status for r in turn(moved.state).records]
    assert statuses == ["expired", "skipped"]


# ----- a budget that pauses and asks -------------------------------------------


def _paused(options: AgentSessionOptions) -> SessionState:
    """A turn that reached `options.spend_limit` and waits for a new one (`intr-b`)."""
    state = start_turn(queued("hello")).state
    state = replace(state, usage=Usage(cost_usd=0.02))
    assert advance(state, options, now=NOW).step == OpenBudgetStep()
    return open_interrupt(
        state, options, interrupt_id="intr-b", now=NOW, budget=True
    ).state


def test_a_spent_budget_waits_for_a_new_limit_and_goes_on_under_it() -> None:
    options = AgentSessionOptions(spend_limit=0.01)
    state = _paused(options)
    assert session_status(state) == "budget_reached"
    interrupt = state.interrupts["intr-b"]
    assert (interrupt.kind, interrupt.tool_name, interrupt.arguments) == (
        "budget",
        "spend_limit",
        {"spent_usd": 0.02, "spend_limit_usd": 0.01},
    )
    assert turn(carried(state)).phase == "await_budget"  # across continue-as-new
    too_low = check_budget_answer(
        state, "intr-b", approved=True, new_spend_limit=0.015, edited=False
    )
    assert too_low is not None and too_low.reason == "invalid_resolution"
    assert "0.0200 USD spent" in too_low.message
    assert (
        check_budget_answer(
            state, "intr-b", approved=True, new_spend_limit=0.05, edited=False
        )
        is None
    )

    answered = apply_resolution(
        state,
        interrupt_id="intr-b",
        approved=True,
        rejection_message=None,
        update_id="b-1",
        new_spend_limit=0.05,
    ).state
    settled = settle_approval(answered)

    assert settled.state.spend_limit == 0.05
    assert settled.events[0].data["new_spend_limit"] == 0.05
    step = advance(settled.state, options, now=NOW).step
    assert isinstance(step, RunModelStep)
    assert step.max_budget_usd == 0.03  # the segment may spend what is left


def test_a_declined_budget_fails_the_turn_as_a_spent_limit_did() -> None:
    options = AgentSessionOptions(spend_limit=0.01)
    state = _paused(options)
    declined = apply_resolution(
        state,
        interrupt_id="intr-b",
        approved=False,
        rejection_message="enough",
        update_id="b-2",
    ).state

    settled = settle_approval(declined)

    assert settled.state.active is None
    assert [e.type for e in settled.events] == ["interrupt_resolved", "turn_failed"]
    error = str(settled.events[1].data["error"])
    assert "spend limit reached" in error and "enough" in error


def test_a_segment_stopped_at_its_budget_counts_its_cost_and_pauses() -> None:
    options = AgentSessionOptions(spend_limit=0.01)
    state = running("hello")
    assert model_step(state, options).max_budget_usd == 0.01

    stopped = model_failed(
        state,
        options,
        error="reached the budget",
        budget_reached=True,
        usage=Usage(cost_usd=0.012, model_calls=1),
    )

    assert stopped.step == OpenBudgetStep()
    assert stopped.state.usage.cost_usd == 0.012
    assert turn(stopped.state).reruns == 1  # it reruns from its start after a limit


def test_a_cancel_while_the_budget_waits_ends_the_turn_cancelled() -> None:
    options = AgentSessionOptions(spend_limit=0.01)
    state = request_cancel(_paused(options), reason="", update_id="c").state
    closed = settle_approval(state)
    ended = advance(closed.state, options, now=NOW)
    assert ended.state.active is None
    assert [e.type for e in ended.events] == ["turn_cancelled"]


def test_an_approval_closed_by_a_cancel_says_so_in_its_event() -> None:
    state = request_cancel(waiting(REFUND), reason="stop", update_id="c").state

    closed = settle_approval(state)

    resolved, finished = closed.events
    assert resolved.data == {
        "interrupt_id": "intr-1",
        "approved": False,
        "rejection_message": "the turn was cancelled: stop",
        "resolved_by": None,
        "cancelled": True,
    }
    assert finished.data["status"] == "cancelled"
    ended = advance(closed.state, OPTIONS, now=NOW)
    assert [e.type for e in ended.events] == ["turn_cancelled"]


# ----- bounded by design: what users send never grows the state ------------------

STATE_BOUND = 64 * 1024
"""Bytes of a state (as continue-as-new carries it) that these tests stay under."""


def state_bytes(state: SessionState) -> int:
    return len(INPUT_JSON.dump_json(SessionInput(state=state)))


def pending_bytes(state: SessionState) -> int:
    return len(TypeAdapter(list[PendingItem]).dump_json(state.pending))


def events_bytes(events: tuple[AgentEvent, ...]) -> int:
    return len(TypeAdapter(tuple[AgentEvent, ...]).dump_json(events))


def test_a_1_5_mb_rejection_by_the_recorded_signal_is_kept_clipped() -> None:
    # `record_resolution` (a Signal) has no validator: what it carries reaches
    # `apply_resolution` as sent. Whole, it was in the interrupt, both record
    # lists, two events, the resumed segment's input and the turn log: 4.5 MB.
    outcome = apply_resolution(
        waiting(REFUND),
        interrupt_id="intr-1",
        approved=False,
        rejection_message="r" * 1_500_000,
        update_id=None,
    )
    assert outcome.answer
    kept = "r" * 9_999 + "…"
    assert outcome.state.interrupts["intr-1"].rejection_message == kept
    assert state_bytes(outcome.state) < STATE_BOUND

    settled = settle_approval(outcome.state)
    assert [e.data["rejection_message"] for e in settled.events] == [kept, kept]
    assert events_bytes(settled.events) < 2 * 10_000 + 2_000
    assert [r.rejection_message for r in turn(settled.state).turn_records] == [kept]
    assert state_bytes(settled.state) < STATE_BOUND

    resumed = advance(settled.state, OPTIONS, now=NOW)
    assert isinstance(resumed.step, RunModelStep) and resumed.step.resume is not None
    assert [r.rejection_message for r in resumed.step.resume.records] == [kept]
    ended = model_answered(
        resumed.state, segment_id="seg", final_text="ok", usage=USAGE
    )
    (finished,) = ended.state.unpublished
    assert summary(finished).tool_calls[0].rejection_message == kept
    assert state_bytes(ended.state) < STATE_BOUND


def test_a_rejection_within_the_limit_is_kept_whole() -> None:
    message = "é" * 10_000
    state = resolved(waiting(REFUND), approved=False, message=message)
    assert state.interrupts["intr-1"].rejection_message == message


def test_a_1_9_mb_tool_error_is_recorded_clipped() -> None:
    state = advance(at_calls(READ), OPTIONS, now=NOW).state
    error = "RuntimeError: " + "e" * 1_900_000

    recorded = record_unknown_outcome(state, error=error, attempts=3)

    clipped = error[:999] + "…"
    assert [r.output for r in turn(recorded.state).records] == [clipped]
    assert [r.output for r in turn(recorded.state).turn_records] == [clipped]
    assert recorded.events[0].data["error"] == clipped
    assert state_bytes(recorded.state) < STATE_BOUND
    resumed = advance(recorded.state, OPTIONS, now=NOW)
    assert isinstance(resumed.step, RunModelStep) and resumed.step.resume is not None
    assert [r.output for r in resumed.step.resume.records] == [clipped]


def test_a_1_9_mb_segment_error_fails_the_turn_with_it_clipped() -> None:
    error = "SessionError: " + "e" * 1_900_000

    failed = model_failed(running("hello"), OPTIONS, error=error)

    clipped = error[:999] + "…"
    assert failed.events[0].type == "turn_failed"
    assert failed.events[0].data["error"] == clipped
    assert summary(failed.state.unpublished[0]).error == clipped
    assert state_bytes(failed.state) < STATE_BOUND


def _cancelled(state: SessionState, n: int) -> SessionState:
    """`state` after turn `n`, sending one new message, was cancelled."""
    state = queued(f"try {n}", state=state)
    state = advance(start_turn(state).state, OPTIONS, now=NOW).state
    state = request_cancel(state, reason="stop", update_id=f"cancel-{n}").state
    return cancel_turn(state).state


def _failed(state: SessionState, n: int) -> SessionState:
    """`state` after turn `n` failed (its prompts stay pending)."""
    state = advance(start_turn(state).state, OPTIONS, now=NOW).state
    return model_failed(state, OPTIONS, error=f"SessionError: failure {n}").state


def test_1000_cancelled_turns_in_a_row_keep_three_notes_and_a_count() -> None:
    state = starting_state(None, session_id="s1")
    sizes: list[int] = []
    for n in range(1, 1001):
        # The publish takes the ended turn out of `unpublished`.
        state = replace(_cancelled(state, n), unpublished=[])
        sizes.append(pending_bytes(state))

    notes = [i for i in state.pending if isinstance(i, TurnFailureNote)]
    assert len(state.pending) == len(notes) == 4
    assert notes[0] == TurnFailureNote(
        turn_id="turn-997",
        text="997 earlier turns failed or were cancelled; their notes were not "
        "kept, so check what their tool calls did before you repeat one.",
    )
    assert [n.turn_id for n in notes[1:]] == ["turn-998", "turn-999", "turn-1000"]
    assert notes[-1].text.startswith("The previous turn (turn-1000) failed: it was")
    # Flat: the notes after turn 1,000 take what they took at turn 10.
    assert sizes[-1] < 2_000
    assert sizes[-1] <= sizes[9] + 30  # longer turn numbers
    assert state_bytes(state) < STATE_BOUND
    # What the next turn sends is just as bounded.
    step = advance(start_turn(queued("hello", state=state)).state, OPTIONS, now=NOW)
    assert isinstance(step.step, RunModelStep) and len(step.step.pending) == 5


def test_1000_failed_turns_in_a_row_keep_their_prompt_three_notes_and_a_count() -> None:
    state = queued("fail")
    for n in range(1, 1001):
        state = replace(_failed(state, n), unpublished=[])
    assert state.pending[0] == UserPrompt(text="fail")
    notes = state.pending[1:]
    assert [n.turn_id for n in notes if isinstance(n, TurnFailureNote)] == [
        "turn-997",
        "turn-998",
        "turn-999",
        "turn-1000",
    ]
    assert isinstance(notes[0], TurnFailureNote)
    assert notes[0].text.startswith("997 earlier turns failed or were cancelled;")
    assert pending_bytes(state) < 2_000


def test_collapsed_notes_keep_the_prompts_between_them_in_order() -> None:
    notes = [failure_note(f"turn-{n}", "boom", []) for n in range(1, 6)]
    items = [
        UserPrompt(text="a"),
        notes[0],
        UserPrompt(text="b"),
        notes[1],
        notes[2],
        UserPrompt(text="c"),
        notes[3],
        notes[4],
    ]
    collapsed = collapse_notes(items)
    assert collapsed == [
        UserPrompt(text="a"),
        TurnFailureNote(
            turn_id="turn-2",
            text="2 earlier turns failed or were cancelled; their notes were not "
            "kept, so check what their tool calls did before you repeat one.",
        ),
        UserPrompt(text="b"),
        notes[2],
        UserPrompt(text="c"),
        notes[3],
        notes[4],
    ]
    # Within the limit, nothing changes; a collapsed note counts on.
    assert collapse_notes(collapsed) == collapsed
    again = collapse_notes([*collapsed, failure_note("turn-6", "boom", [])])
    first = again[1]
    assert isinstance(first, TurnFailureNote) and first.turn_id == "turn-3"
    assert first.text.startswith("3 earlier turns failed or were cancelled;")
    one = collapse_notes(notes[:4])
    assert isinstance(one[0], TurnFailureNote)
    assert one[0].text.startswith("1 earlier turn failed or was cancelled;")
    assert collapse_notes(one) == one

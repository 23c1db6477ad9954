"""The turn machine: a session's turns as pure transitions over `SessionState`.

A turn moves through phases kept in `ActiveTurn.phase`, so a session can
continue as new in the middle of a turn (waiting for approval) and pick up
exactly where it was:

    run_model ─► tool ─► await_approval ─► execute ─► tool … ─► resume ─► (run_model again)
        │                                                                    │
        └──────────── turn_completed / failure note ◄────────────────────────┘

Every function here takes plain data (the state, a Step's result, the time,
a new ID) and returns plain data: a `Transition` holding the next state, the
events to emit and the Step to run next. None does I/O, reads a clock or
makes an ID, and none changes its arguments, so the session workflow runs them
deterministically and tests run them without a server. The workflow is their
interpreter: it asks `advance` for the next Step, runs it (an activity, a
wait, a publish, continue-as-new) and hands the result to the function named
in the Step's docstring, until the turn ends.

The Update handlers' rules are here too: `check_message`, `check_resolution`
and `check_end` are their validators, and `queue_message`, `apply_resolution`
and `end_session` remember Update IDs in the state, because Temporal
deduplicates an Update ID within one run only.

Ending a session (`end_session`) is graceful, never a cancellation: nothing
that runs is interrupted. An idle session ends at once. One with work in
progress (a running turn, queued messages, approvals waiting) is refused
unless `force`; forced, its approvals are rejected ("the session ended"), its
queued messages are dropped, and a running turn stops after the Step it is
in (its model segment or tool call finishes, nothing runs after it). Then
`finish_session` emits `session_ended` and the workflow completes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from ._blob import PREVIEW_CHARS, BlobReference, preview
from ._events import (
    AgentEvent,
    InterruptCreatedEvent,
    InterruptResolvedEvent,
    SessionEndedEvent,
    ToolCallFinishedEvent,
    TurnCancelledEvent,
    TurnCompletedEvent,
    TurnFailedEvent,
    TurnStartedEvent,
    agent_event,
)
from ._json import JsonObject
from ._media import ImageReference
from ._options import AgentSessionOptions
from ._pending import (
    INLINE_TEXT_LIMIT,
    MAX_QUEUED_MESSAGES,
    PendingItem,
    UserPrompt,
    collapse_notes,
    failure_note,
)
from ._policy import ToolStep
from ._records import ToolCall, ToolCallEdit, ToolRecord, ToolRecordStatus
from ._state import (
    KEEP_RESOLVED_INTERRUPTS,
    REJECTION_MESSAGE_LIMIT,
    ActiveTurn,
    Interrupt,
    SessionState,
    TurnStatus,
    call_fields,
    clip,
    finished_turn,
    migrate_carried_state,
    turn_summary,
)
from ._usage import Usage

NAME_LIMIT = 200
"""Characters kept of an approver's name and of a reason to end: both ride in the state."""
KEEP_UPDATE_IDS = 500
"""IDs of the latest state-changing Updates kept to recognise a retry."""

DEADLINE_PASSED = "no approval arrived before the deadline"
"""The rejection message of an interrupt whose deadline passed."""

CANCELLED = "the turn was cancelled"
"""What a cancelled turn's error and its unrun calls' records say (with the reason)."""

BUDGET_TOOL_NAME = "spend_limit"
"""The `tool_name` a budget interrupt shows: what its answer changes."""

SESSION_ENDED = "the session ended"
"""The rejection message of an approval the session's end rejected (with its reason)."""

CLI_CALL_KIND = "cli"
"""`ToolCall.metadata["kind"]` of a tool of the model's own CLI (the Claude adapter's
Bash, Write, ...): approved, it runs inside the resumed model segment."""


# ----- Steps ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class SegmentResume:
    """What a resumed segment continues from: the runner's state and the calls' records."""

    run_state: JsonObject
    partial_segment_id: str | None
    records: tuple[ToolRecord, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunModelStep:
    """Run the active turn's model segment; then `model_answered`, `calls_requested` or `model_failed`."""

    turn_id: str
    segment: int
    """The segment's number in its turn, from 1."""
    transcript_head: str | None
    pending: tuple[PendingItem, ...]
    """What the turn sends: its queued prompts and failure notes, oldest first."""
    resume: SegmentResume | None = None
    """Set when the segment continues after the turn's tool calls."""
    max_budget_usd: float | None = None
    """What is left of the session's spend limit (USD): the segment stops at the
    model call that spends it (the CLI's `max_budget_usd`); None without a limit."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallToolStep:
    """Run the active turn's current call; then `record_outcome` or `record_unknown_outcome`."""

    turn_id: str
    call: ToolCall
    tool_step: ToolStep
    attempts: int
    """Attempts of the Step: 1 unless `tool_step` is `call_tool`."""
    timeout: timedelta
    """Limit for one attempt."""


def step_execution_id(step: RunModelStep | CallToolStep) -> str:
    """The Step's ID, the same on every attempt: its events and records are keyed by it."""
    match step:
        case RunModelStep():
            return f"{step.turn_id}/run_model/{step.segment}"
        case CallToolStep():
            return f"{step.turn_id}/{step.tool_step}/{step.call.tool_call_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenInterruptStep:
    """The current call waits for a person: name an interrupt, then `open_interrupt`."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class OpenBudgetStep:
    """The session reached its spend limit: name an interrupt, then `open_interrupt(budget=True)`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AwaitApprovalStep:
    """Wait for the interrupt's resolution, its deadline or continue-as-new; then `settle_approval`."""

    interrupt_id: str
    timeout: timedelta | None
    """Time left before the deadline (zero once it passed); None waits without one."""


@dataclass(frozen=True, slots=True)
class PublishStep:
    """Project the snapshot and write the events and ended turns to the runtime store."""


@dataclass(frozen=True, slots=True)
class ContinueAsNewStep:
    """Hand the state to a new run of the session, once no Update is in flight."""


Step = (
    RunModelStep
    | CallToolStep
    | OpenInterruptStep
    | OpenBudgetStep
    | AwaitApprovalStep
    | PublishStep
    | ContinueAsNewStep
)
"""What the interpreter runs for the machine: the only things it needs the world for."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """One change of the session: the state after it, its events, and the Step it needs."""

    state: SessionState
    events: tuple[AgentEvent, ...] = ()
    """Events to write with the next RunModel or publish, in order."""
    step: Step | None = None
    """The Step to run now; None: ask `advance`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UpdateOutcome:
    """What an Update handler did: the state after it, and its answer."""

    state: SessionState
    answer: bool


RefusalReason = Literal[
    "invalid_message",
    "queue_full",
    "unknown_interrupt",
    "session_busy",
    "session_ended",
    "invalid_resolution",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    """Why a validator refuses an Update (a refused Update writes no history)."""

    reason: RefusalReason
    message: str
    """For the caller: names the value and says what to do instead."""


# ----- a run of the session ---------------------------------------------------


def starting_state(carried: SessionState | None, *, session_id: str) -> SessionState:
    """The state a run starts from: a new session's, or the one continue-as-new carried.

    A carried state counts one run more and is brought to this release's
    bounds (`migrate_carried_state`), whichever release carried it.
    """
    if carried is None:
        return SessionState(session_id=session_id)
    return migrate_carried_state(replace(carried, runs=carried.runs + 1))


def has_work(state: SessionState) -> bool:
    """A turn is running, or queued messages wait for one."""
    return state.active is not None or state.inbox > 0


def start_turn(state: SessionState) -> Transition:
    """A new turn that sends every pending item: the queued prompts and failure notes."""
    counter = state.turn_counter + 1
    turn_id = f"turn-{counter}"
    arrived = state.pending[len(state.pending) - state.inbox :]
    active = ActiveTurn(
        turn_id=turn_id,
        pending_count=len(state.pending),
        prompts=[i.preview for i in arrived if isinstance(i, UserPrompt)],
    )
    return Transition(
        state=replace(state, turn_counter=counter, active=active, inbox=0),
        events=(agent_event(TurnStartedEvent(turn_id=turn_id)),),
    )


def spend_limit(state: SessionState, options: AgentSessionOptions) -> float | None:
    """The session's spend limit (USD): one a person set, else the options'."""
    return state.spend_limit if state.spend_limit is not None else options.spend_limit


def budget_spent(state: SessionState, options: AgentSessionOptions) -> bool:
    """Whether the session's spend reached its limit."""
    limit = spend_limit(state, options)
    return limit is not None and state.usage.cost_usd >= limit


def advance(
    state: SessionState,
    options: AgentSessionOptions,
    *,
    now: datetime,
    budget_pauses: bool = True,
) -> Transition:
    """Make every change that needs nothing from outside, then name the Step that does.

    A spent budget pauses the turn for a new limit (`budget_pauses`; before
    0.2 it failed the turn); a call after a rejected or unfinished one
    of the same reply is skipped; a call without approval goes to execute;
    the end of a batch resumes the model. A session that is ending stops the
    turn here, before its next Step. With no active turn there is no Step.
    """
    events: list[AgentEvent] = []

    def then(transition: Transition) -> Transition:
        return replace(transition, events=(*events, *transition.events))

    while (active := state.active) is not None:
        waits = active.phase in ("await_approval", "await_budget")
        if active.cancel_requested and not waits:
            return then(cancel_turn(state))
        if state.end_requested and not waits:
            return then(_fail_turn(state, _ended_turn_error(state)))
        match active.phase:
            case "run_model" | "resume":
                if budget_spent(state, options):
                    if budget_pauses:
                        return then(Transition(state=state, step=OpenBudgetStep()))
                    return then(_fail_turn(state, _limit_text(state, options)))
                state = replace(
                    state, active=replace(active, segment=active.segment + 1)
                )
                return then(Transition(state=state, step=model_step(state, options)))
            case "tool":
                if active.call_index >= len(active.calls):
                    state = replace(state, active=replace(active, phase="resume"))
                    continue
                call = active.calls[active.call_index]
                if any(
                    r.status in ("rejected", "expired", "outcome_unknown")
                    for r in active.records
                ):
                    skipped = _record_of(call, "skipped")
                    state = _record(state, skipped)
                    events.append(_finished_event(skipped))
                elif call.policy.needs_approval:
                    return then(
                        Transition(state=state, step=OpenInterruptStep(call=call))
                    )
                else:
                    state = replace(state, active=replace(active, phase="execute"))
            case "await_approval" | "await_budget":
                return then(Transition(state=state, step=_approval_step(state, now)))
            case "execute":
                return then(Transition(state=state, step=_tool_step(active, options)))
    return then(Transition(state=state))


# ----- the model phase --------------------------------------------------------


def model_step(
    state: SessionState, options: AgentSessionOptions | None = None
) -> RunModelStep:
    """The RunModel Step of the segment the active turn is at.

    With `options`, the Step carries what is left of the spend limit.
    """
    active = _active(state)
    resume = None
    if active.phase == "resume":
        resume = SegmentResume(
            run_state=active.run_state,
            partial_segment_id=active.partial_segment_id,
            records=tuple(active.records),
        )
    limit = spend_limit(state, options) if options is not None else None
    return RunModelStep(
        turn_id=active.turn_id,
        segment=active.segment,
        transcript_head=state.transcript_head,
        pending=tuple(state.pending[: active.pending_count]),
        resume=resume,
        max_budget_usd=None
        if limit is None
        else round(max(limit - state.usage.cost_usd, 0.0), 6),
    )


def model_answered(
    state: SessionState,
    *,
    segment_id: str,
    final_text: str,
    usage: Usage,
    attempt: int = 0,
) -> Transition:
    """The segment ended the turn: its items leave `pending`, its summary goes to the log.

    `attempt` is the segment's attempt that answered (0: not known); a later
    attempt than the first marks the turn rerun.
    """
    state = _rerun(_add_usage(state, usage), attempt)
    count = _active(state).pending_count
    state = replace(state, transcript_head=segment_id, pending=state.pending[count:])
    active = _active(state)
    completed = TurnCompletedEvent(turn_id=active.turn_id, reruns=active.reruns)
    return Transition(
        state=_end_turn(state, "completed", final_text=final_text),
        events=(agent_event(completed),),
        step=PublishStep(),
    )


def calls_requested(
    state: SessionState,
    *,
    segment_id: str,
    calls: Sequence[ToolCall],
    run_state: JsonObject,
    usage: Usage,
    attempt: int = 0,
) -> Transition:
    """The segment stopped at tool calls: the turn goes through them in order."""
    state = _rerun(_add_usage(state, usage), attempt)
    if not calls:
        return _fail_turn(state, "the runner requested tool calls but named none")
    active = replace(
        _active(state),
        run_state=run_state,
        partial_segment_id=segment_id,
        calls=list(calls),
        call_index=0,
        records=[],
        phase="tool",
    )
    return Transition(state=replace(state, active=active))


def model_failed(
    state: SessionState,
    options: AgentSessionOptions,
    *,
    error: str,
    timed_out: bool = False,
    too_large: bool = False,
    attempts: int = 0,
    budget_reached: bool = False,
    usage: Usage | None = None,
) -> Transition:
    """The segment failed for good (its attempts are used up): the turn fails.

    `budget_reached`: the segment stopped at the model call that spent the
    rest of the limit (`usage` is what it spent); the turn pauses for a new
    limit instead, and the segment reruns from its start after one.

    `timed_out`: it ran past `run_model_limit` or stopped heartbeating.
    `too_large`: the model refused the turn's prompts as too large.
    `attempts`: how many attempts ran (0: not known); more than one marks the
    turn rerun.
    """
    state = _rerun(state, attempts)
    if budget_reached:
        if usage is not None:
            state = _add_usage(state, usage)
        return Transition(state=_rerun(state, 2), step=OpenBudgetStep())
    if timed_out:
        error = (
            f"the model segment exceeded `run_model_limit` ({options.run_model_limit}) "
            f"or stopped heartbeating ({error}); raise the limit in the session options"
        )
    return _fail_turn(state, error, drop_prompts=too_large)


# ----- approvals --------------------------------------------------------------


def open_interrupt(
    state: SessionState,
    options: AgentSessionOptions,
    *,
    interrupt_id: str,
    now: datetime,
    budget: bool = False,
) -> Transition:
    """The turn waits for a person under `interrupt_id`, until the deadline if any.

    Its current call waits for approval; with `budget`, the turn waits for a
    person to raise the session's spend limit (or decline).
    """
    active = _active(state)
    created_at, deadline = now.isoformat(), _deadline(options, now)
    if budget:
        spent, limit = state.usage.cost_usd, spend_limit(state, options)
        arguments: JsonObject = {
            "spent_usd": round(spent, 6),
            "spend_limit_usd": limit,
        }
        interrupt = Interrupt(
            interrupt_id=interrupt_id,
            turn_id=active.turn_id,
            tool_call_id="",
            tool_name=BUDGET_TOOL_NAME,
            arguments=arguments,
            effect="unclassified",
            reason=f"the session spent {spent:.4f} USD of its {limit or 0:.4f} USD "
            "limit; answer with a new limit to continue, or decline to end the turn",
            created_at=created_at,
            deadline=deadline,
            kind="budget",
        )
        paused = replace(
            active,
            interrupt_id=interrupt_id,
            paused_phase=active.phase,
            phase="await_budget",
        )
        return _opened(state, interrupt, paused)
    call = active.calls[active.call_index]
    interrupt = Interrupt(
        interrupt_id=interrupt_id,
        turn_id=active.turn_id,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        effect=call.policy.effect,
        reason=call.reason or f"{call.tool_name} is {call.policy.effect}",
        created_at=created_at,
        deadline=deadline,
        arguments_ref=call.arguments_ref,
        at_least_once=runs_in_model_segment(call),
    )
    waiting = replace(active, interrupt_id=interrupt_id, phase="await_approval")
    return _opened(state, interrupt, waiting)


def _deadline(options: AgentSessionOptions, now: datetime) -> str | None:
    """When an interrupt opened `now` expires, or None when it waits as long as it takes."""
    deadline = options.interrupt_deadline
    return (now + deadline).isoformat() if deadline is not None else None


def _opened(
    state: SessionState, interrupt: Interrupt, active: ActiveTurn
) -> Transition:
    """`interrupt` opens, with the turn `active` waiting for it, and says so."""
    created = InterruptCreatedEvent(
        **call_fields(interrupt),
        arguments=interrupt.arguments,
        arguments_ref=interrupt.arguments_ref,
        at_least_once=interrupt.at_least_once,
        kind=interrupt.kind,
    )
    interrupts = {**state.interrupts, interrupt.interrupt_id: interrupt}
    return Transition(
        state=replace(state, interrupts=interrupts, active=active),
        events=(agent_event(created),),
        step=PublishStep(),
    )


def runs_in_model_segment(call: ToolCall) -> bool:
    """Whether `call`, approved, runs inside the resumed model segment (not its own Step).

    Such a call (a tool of the Claude CLI: Bash, Write, ...) is not recorded
    by the session: a crash before its segment finished reruns the segment,
    and the model may call it again. It runs at least once.
    """
    return call.metadata.get("kind") == CLI_CALL_KIND


def approval_settled(state: SessionState, interrupt_id: str) -> bool:
    """Whether the interrupt was resolved, or its turn cancelled: what an approval waits for."""
    return state.interrupts[interrupt_id].resolved or cancel_requested(state)


def settle_approval(state: SessionState, *, timed_out: bool = False) -> Transition:
    """The approval wait ended: by a resolution, by the deadline, or for continue-as-new.

    Approved, the call goes to execute (with the edited input, if a person
    edited it); rejected by a person (or by ending the session), it gets a
    `rejected` record; with its deadline passed, an `expired` one (nobody
    refused it, and the model is told so). After either, the rest of its reply
    is skipped. Still unresolved, the state continues as new and waits again.
    """
    active = _active(state)
    assert active.interrupt_id is not None
    interrupt = state.interrupts[active.interrupt_id]
    if timed_out and not interrupt.resolved:
        interrupt = replace(
            interrupt,
            resolved=True,
            approved=False,
            expired=True,
            rejection_message=DEADLINE_PASSED,
        )
        interrupts = {**state.interrupts, interrupt.interrupt_id: interrupt}
        state = replace(state, interrupts=interrupts)
    if not interrupt.resolved and active.cancel_requested:
        return _close_for_cancel(state, interrupt)
    if not interrupt.resolved:
        return Transition(state=state, step=ContinueAsNewStep())
    if interrupt.kind == "budget":
        return _settle_budget(state, interrupt)
    call = active.calls[active.call_index]
    events = [agent_event(_resolved_event(interrupt, call))]
    if interrupt.approved:
        state = replace(state, active=replace(active, phase="execute"))
    else:
        refused = replace(
            _record_of(call, "expired" if interrupt.expired else "rejected"),
            rejection_message=interrupt.rejection_message or "",
        )
        state = _record(state, refused)
        events.append(_finished_event(refused))
    return Transition(state=state, events=tuple(events), step=PublishStep())


def _resolved_event(
    interrupt: Interrupt, call: ToolCall | None = None
) -> InterruptResolvedEvent:
    """The `interrupt_resolved` event of how `interrupt` was answered.

    For a `call` that runs edited, it carries the edit; for an approved budget,
    the new limit.
    """
    edit = call.edit if call is not None and interrupt.approved else None
    edited = call if edit is not None else None
    approved_budget = interrupt.kind == "budget" and bool(interrupt.approved)
    return InterruptResolvedEvent(
        interrupt_id=interrupt.interrupt_id,
        approved=bool(interrupt.approved),
        rejection_message=interrupt.rejection_message,
        resolved_by=interrupt.resolved_by,
        expired=interrupt.expired,
        edited_arguments=edited.arguments if edited is not None else None,
        edited_arguments_ref=edited.arguments_ref if edited is not None else None,
        original_arguments=edit.original_arguments if edit is not None else None,
        original_arguments_ref=(
            edit.original_arguments_ref if edit is not None else None
        ),
        edited_by=edit.edited_by if edit is not None else None,
        new_spend_limit=interrupt.new_spend_limit if approved_budget else None,
    )


def _settle_budget(state: SessionState, interrupt: Interrupt) -> Transition:
    """A budget interrupt answered: a new limit continues the turn; else it fails."""
    active = _active(state)
    events = (agent_event(_resolved_event(interrupt)),)
    if interrupt.approved and interrupt.new_spend_limit is not None:
        back = replace(active, phase=active.paused_phase, interrupt_id=None)
        raised = replace(state, active=back, spend_limit=interrupt.new_spend_limit)
        return Transition(state=raised, events=events, step=PublishStep())
    limit = spend_limit_of(interrupt)
    spent = state.usage.cost_usd
    if interrupt.expired:
        why = "no new limit arrived before the deadline"
    else:
        why = interrupt.rejection_message or "a person declined to raise it"
    failed = _fail_turn(
        state,
        f"spend limit reached: {spent:.4f} USD of {limit:.4f} USD ({why}); "
        "answer the next spend-limit approval with a new limit, or raise "
        "`spend_limit`, to continue",
    )
    return replace(failed, events=(*events, *failed.events))


# ----- cancelling a turn ------------------------------------------------------


def cancel_requested(state: SessionState) -> bool:
    """Whether the active turn was asked to stop (`request_cancel`)."""
    return state.active is not None and state.active.cancel_requested


def check_cancel(state: SessionState) -> Refusal | None:
    """Why `cancel_turn` refuses, or None: only an ended session refuses.

    With no turn running there is nothing to stop: `request_cancel` answers False.
    """
    return _ended(state) if state.end_requested else None


def request_cancel(
    state: SessionState,
    *,
    reason: str,
    update_id: str | None,
    cancelled_by: str | None = None,
) -> UpdateOutcome:
    """Ask the active turn to stop; False when no turn runs or one was asked already.

    The turn stops at its next change (`advance`): a running model segment is
    cancelled by the interpreter (its CLI killed), a waiting approval is closed
    as cancelled, and a tool Step in flight finishes and is recorded first,
    since stopping a write midway would leave its outcome unknown.
    """
    active = state.active
    if active is None or active.cancel_requested:
        applied = update_id is not None and update_id in state.update_ids
        return UpdateOutcome(state=state, answer=applied)
    update_ids, _ = _remember(state.update_ids, update_id)
    active = replace(
        active,
        cancel_requested=True,
        cancel_reason=preview(reason, NAME_LIMIT) if reason else "",
        cancelled_by=None
        if cancelled_by is None
        else preview(cancelled_by, NAME_LIMIT),
    )
    cancelled = replace(
        state, active=active, version=state.version + 1, update_ids=update_ids
    )
    return UpdateOutcome(state=cancelled, answer=True)


def cancel_turn(state: SessionState, *, streamed_text: str = "") -> Transition:
    """End the active turn `cancelled`, with the text it had streamed (`streamed_text`).

    A call it was about to run gets a `cancelled` record. Its prompts leave
    `pending` (sent again, the model would do what the person stopped); a
    note for the next turn says what they asked and what ran, so the model
    knows the turn was stopped.
    """
    active = _active(state)
    message = _cancel_message(active)
    events: list[AgentEvent] = []
    if active.phase in ("tool", "execute") and active.call_index < len(active.calls):
        record = replace(
            _record_of(active.calls[active.call_index], "cancelled"),
            rejection_message=message,
        )
        state = _record(state, record)
        events.append(_finished_event(record))
        active = _active(state)
    count = active.pending_count
    sent = state.pending[:count]
    dropped = [i for i in sent if isinstance(i, UserPrompt)]
    kept: list[PendingItem] = [i for i in sent if not isinstance(i, UserPrompt)]
    by = f" by {active.cancelled_by}" if active.cancelled_by else ""
    note = failure_note(
        active.turn_id, f"it was stopped{by}: {message}", active.turn_records
    )
    if dropped:
        note = replace(
            note,
            text=note.text
            + "\nIt was answering: "
            + "; ".join(repr(preview(p.text, 80)) for p in dropped),
        )
    pending = collapse_notes([*kept, note, *state.pending[count:]])
    cancelled = TurnCancelledEvent(
        turn_id=active.turn_id,
        reason=active.cancel_reason,
        cancelled_by=active.cancelled_by,
        reruns=active.reruns,
    )
    ended = _end_turn(
        replace(state, pending=pending),
        "cancelled",
        final_text=streamed_text,
        error=message,
    )
    return Transition(
        state=ended,
        events=(*events, agent_event(cancelled)),
        step=PublishStep(),
    )


def _close_for_cancel(state: SessionState, interrupt: Interrupt) -> Transition:
    """The waiting approval of a cancelled turn, closed: its call is `cancelled`."""
    active = _active(state)
    message = _cancel_message(active)
    closed = replace(
        interrupt, resolved=True, approved=False, rejection_message=message
    )
    state = replace(state, interrupts={**state.interrupts, closed.interrupt_id: closed})
    resolved = InterruptResolvedEvent(
        interrupt_id=closed.interrupt_id,
        approved=False,
        rejection_message=message,
        cancelled=True,
    )
    if interrupt.kind == "budget":
        # No call waits: the turn goes back to its model phase, which cancels it.
        back = replace(active, phase=active.paused_phase, interrupt_id=None)
        return Transition(
            state=replace(state, active=back), events=(agent_event(resolved),)
        )
    record = replace(
        _record_of(active.calls[active.call_index], "cancelled"),
        rejection_message=message,
    )
    state = _record(state, record)
    return Transition(
        state=state, events=(agent_event(resolved), _finished_event(record))
    )


# ----- the tool phase ---------------------------------------------------------


def record_outcome(
    state: SessionState,
    *,
    output: str,
    is_error: bool = False,
    output_ref: BlobReference | None = None,
    finished_by_resumed_turn: bool = False,
    images: Sequence[ImageReference] = (),
    attempts: int = 0,
) -> Transition:
    """The call's Step returned: `finished`, or `failed` when the tool reported an error."""
    record = replace(
        _record_of(_current_call(state), "failed" if is_error else "finished"),
        output=output,
        output_ref=output_ref,
        finished_by_resumed_turn=finished_by_resumed_turn,
        images=tuple(images),
        attempts=attempts,
    )
    return Transition(state=_record(state, record))


def record_unknown_outcome(
    state: SessionState, *, error: str, attempts: int = 0
) -> Transition:
    """The call's Step failed for good: it may or may not have acted.

    Its `tool_call_finished` event says `outcome_unknown` with `error`: what
    the tool raised, or the crash or timeout that ended its Step, clipped to
    `SUMMARY_TEXT_LIMIT` characters (the record rides in the state).
    """
    record = replace(
        _record_of(_current_call(state), "outcome_unknown"),
        output=clip(error),
        attempts=attempts,
    )
    return Transition(state=_record(state, record), events=(_finished_event(record),))


# ----- Updates ----------------------------------------------------------------


def check_message(state: SessionState, prompt: UserPrompt) -> Refusal | None:
    """Why `send_user_message` refuses `prompt`, or None to accept it.

    A message of images alone may have empty text. Whether the runner takes
    images is the handler's question (`queue_message`), not a refusal.
    """
    if state.end_requested:
        return _ended(state)
    text, by_reference = prompt.text, prompt.text_ref is not None
    if not isinstance(text, str) or (  # pyright: ignore[reportUnnecessaryIsInstance]
        not text.strip() and not prompt.images and not by_reference
    ):
        return Refusal(
            reason="invalid_message",
            message=f"user message text must be a non-empty string, got {text!r}",
        )
    if by_reference and len(text) > PREVIEW_CHARS:
        return Refusal(
            reason="invalid_message",
            message=f"a user message by reference carries a preview of at most "
            f"{PREVIEW_CHARS} characters as its text, got {len(text):,}; send it "
            "with `SessionClient.send_user_message`, which stores it and makes the "
            "preview",
        )
    size = len(text.encode())
    if not by_reference and size > INLINE_TEXT_LIMIT:
        return Refusal(
            reason="invalid_message",
            message=f"a user message of {size} bytes must travel by reference "
            f"(more than {INLINE_TEXT_LIMIT} bytes inline); send it with "
            "`SessionClient.send_user_message`, which stores it first",
        )
    queued = sum(isinstance(i, UserPrompt) for i in state.pending)
    if queued >= MAX_QUEUED_MESSAGES:
        return Refusal(
            reason="queue_full",
            message=f"session {state.session_id!r} already has {queued} messages "
            "waiting for a turn (the most it queues); wait until it answers "
            "(`wait_for_idle`) and send this message again",
        )
    return None


def queue_message(
    state: SessionState,
    prompt: UserPrompt,
    *,
    update_id: str | None,
    images_supported: bool,
) -> UpdateOutcome:
    """Queue `prompt` for the next turn (the current one's successor if one runs).

    Answers False, and queues nothing, for images the runner cannot send; a
    retry of an Update already applied (across continue-as-new) answers True
    and queues nothing.
    """
    if prompt.images and not images_supported:
        return UpdateOutcome(state=state, answer=False)
    update_ids, seen = _remember(state.update_ids, update_id)
    if seen:
        return UpdateOutcome(state=state, answer=True)
    queued = replace(
        state,
        pending=[*state.pending, prompt],
        inbox=state.inbox + 1,
        version=state.version + 1,
        update_ids=update_ids,
    )
    return UpdateOutcome(state=queued, answer=True)


def check_budget_answer(
    state: SessionState,
    interrupt_id: str,
    *,
    approved: bool,
    new_spend_limit: float | None,
    edited: bool,
) -> Refusal | None:
    """Why a resolution does not fit its interrupt's kind, or None.

    A `budget` interrupt is approved with a new limit above what the session
    spent; a tool call's takes no limit, and only a tool call's takes an edit.
    """
    interrupt = state.interrupts.get(interrupt_id)
    if interrupt is None or interrupt.resolved:
        return None  # unknown or answered: `check_resolution`/`apply_resolution` say
    if interrupt.kind != "budget":
        if new_spend_limit is None:
            return None
        return Refusal(
            reason="invalid_resolution",
            message=f"interrupt {interrupt_id!r} approves the tool call "
            f"{interrupt.tool_name}, not a budget; pass `new_spend_limit` only for a "
            "spend-limit interrupt",
        )
    spent = state.usage.cost_usd
    if edited:
        return Refusal(
            reason="invalid_resolution",
            message=f"interrupt {interrupt_id!r} asks for a new spend limit, which "
            "takes no edited input; pass `new_spend_limit`",
        )
    if approved and (new_spend_limit is None or new_spend_limit <= spent):
        return Refusal(
            reason="invalid_resolution",
            message=f"interrupt {interrupt_id!r} asks for a new spend limit: approve "
            f"it with `new_spend_limit` above the {spent:.4f} USD spent (got "
            f"{new_spend_limit!r}), or decline it to end the turn",
        )
    return None


def check_resolution(state: SessionState, interrupt_id: str) -> Refusal | None:
    """Why `resolve_interrupt` refuses `interrupt_id`, or None.

    Only an ID the session never had is refused, and any ID once the session
    ended; a repeat of one it resolved is answered by `apply_resolution`.
    """
    if state.end_requested:
        return _ended(state)
    if interrupt_id in state.interrupts or interrupt_id in state.resolved_interrupts:
        return None
    waiting = [i for i, v in state.interrupts.items() if not v.resolved]
    return Refusal(
        reason="unknown_interrupt",
        message=f"session {state.session_id!r} has no interrupt "
        f"{interrupt_id!r}; pending interrupts: {waiting}",
    )


def apply_resolution(
    state: SessionState,
    *,
    interrupt_id: str,
    approved: bool,
    rejection_message: str | None,
    update_id: str | None,
    resolved_by: str | None = None,
    edited_call: ToolCall | None = None,
    new_spend_limit: float | None = None,
) -> UpdateOutcome:
    """Approve or reject a waiting call; a repeat answers False and changes nothing.

    `resolved_by` names who decided; it travels with the resolution itself
    (not written beside it afterwards), so the interrupt, the call's record and
    the `interrupt_resolved` event all name them, and a crash cannot lose it.
    A client retry of the Update that resolved it (the same Update ID, maybe
    across continue-as-new) is the same request: it answers True.

    `edited_call` approves the call with a person's edit of its input: the
    call as the runner checked and decided it again (`edited_call`), which
    runs in place of the waiting one and keeps the original in its `edit`.
    """
    interrupt = state.interrupts.get(interrupt_id)
    if interrupt is None or interrupt.resolved:
        applied = update_id is not None and update_id in state.update_ids
        return UpdateOutcome(state=state, answer=applied)
    update_ids, _ = _remember(state.update_ids, update_id)
    resolved_by = None if resolved_by is None else preview(resolved_by, NAME_LIMIT)
    # The RPCs refuse a longer one; a recorded Signal is never checked.
    if rejection_message is not None:
        rejection_message = preview(rejection_message, REJECTION_MESSAGE_LIMIT)
    interrupt = replace(
        interrupt,
        resolved=True,
        approved=approved,
        rejection_message=rejection_message,
        # A name, but given by a caller: bounded, since the state carries it.
        resolved_by=resolved_by,
        new_spend_limit=new_spend_limit
        if approved and interrupt.kind == "budget"
        else None,
    )
    resolved = replace(
        state,
        interrupts={**state.interrupts, interrupt_id: interrupt},
        version=state.version + 1,
        update_ids=update_ids,
    )
    if edited_call is not None and approved:
        resolved = _edited(resolved, interrupt, edited_call, resolved_by)
    return UpdateOutcome(state=resolved, answer=True)


def waiting_call(state: SessionState, interrupt_id: str) -> ToolCall | None:
    """The call that waits under `interrupt_id`, or None when none waits there now."""
    active = state.active
    interrupt = state.interrupts.get(interrupt_id)
    if (
        active is None
        or interrupt is None
        or interrupt.resolved
        or active.interrupt_id != interrupt_id
    ):
        return None
    call = active.calls[active.call_index]
    return call if call.tool_call_id == interrupt.tool_call_id else None


def _edited(
    state: SessionState,
    interrupt: Interrupt,
    edited: ToolCall,
    edited_by: str | None,
) -> SessionState:
    """`state` with the waiting call replaced by its edit, the original kept in it."""
    active = _active(state)
    call = active.calls[active.call_index]
    assert call.tool_call_id == edited.tool_call_id == interrupt.tool_call_id
    kept = call.edit or ToolCallEdit(
        original_arguments=call.arguments, original_arguments_ref=call.arguments_ref
    )
    edited = replace(
        edited,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        edit=replace(kept, edited_by=edited_by),
    )
    calls = [*active.calls]
    calls[active.call_index] = edited
    return replace(state, active=replace(active, calls=calls))


def check_end(state: SessionState, *, force: bool) -> Refusal | None:
    """Why `end_session` refuses, or None: work in progress, unless `force`.

    An ended session is not refused: `end_session` answers False for it.
    """
    if force or state.end_requested:
        return None
    active = state.active
    if active is not None and active.phase in ("await_approval", "await_budget"):
        waiting = [i for i, v in state.interrupts.items() if not v.resolved]
        busy = f"waiting for approval of {waiting}"
    elif active is not None:
        busy = f"running {active.turn_id}"
    elif state.inbox:
        busy = f"holding {state.inbox} queued message(s)"
    else:
        return None
    return Refusal(
        reason="session_busy",
        message=f"session {state.session_id!r} is {busy}; wait until it is idle "
        "(`wait_for_idle`, and answer its approvals) or end it anyway with "
        "force=True (`dex-agents end --force`), which rejects its approvals, drops "
        "its queued messages and stops a running turn after its current step",
    )


def end_session(
    state: SessionState, *, reason: str, update_id: str | None
) -> UpdateOutcome:
    """End the session: no turn starts again; False if it already ended.

    Approvals still waiting are rejected with `SESSION_ENDED` (and the
    reason), and queued messages the active turn does not send are dropped;
    `check_end` refused both unless forced. The active turn, if any, stops
    before its next Step (`advance`), then `finish_session` ends the run.
    """
    if state.end_requested:
        applied = update_id is not None and update_id in state.update_ids
        return UpdateOutcome(state=state, answer=applied)
    update_ids, _ = _remember(state.update_ids, update_id)
    reason = preview(reason, NAME_LIMIT) if reason else reason
    message = f"{SESSION_ENDED}: {reason}" if reason else SESSION_ENDED
    interrupts = {
        i: v
        if v.resolved
        else replace(v, resolved=True, approved=False, rejection_message=message)
        for i, v in state.interrupts.items()
    }
    sent = state.active.pending_count if state.active is not None else 0
    ended = replace(
        state,
        end_requested=True,
        end_reason=reason,
        interrupts=interrupts,
        pending=state.pending[:sent],
        inbox=0,
        version=state.version + 1,
        update_ids=update_ids,
    )
    return UpdateOutcome(state=ended, answer=True)


def session_finished(state: SessionState) -> bool:
    """Whether the session ended and no turn is left: its run may complete."""
    return state.end_requested and state.active is None


def finish_session(state: SessionState) -> Transition:
    """The last change of an ended session: `session_ended`, published once."""
    ended = SessionEndedEvent(reason=state.end_reason)
    return Transition(state=state, events=(agent_event(ended),), step=PublishStep())


# ----- helpers ----------------------------------------------------------------


def _active(state: SessionState) -> ActiveTurn:
    assert state.active is not None, "no turn is active"
    return state.active


def _current_call(state: SessionState) -> ToolCall:
    active = _active(state)
    return active.calls[active.call_index]


def _add_usage(state: SessionState, usage: Usage) -> SessionState:
    active = _active(state)
    return replace(
        state,
        usage=state.usage + usage,
        active=replace(active, usage=active.usage + usage),
    )


def _rerun(state: SessionState, attempts: int) -> SessionState:
    """The active turn, marked rerun when its segment took `attempts` (> 1) attempts."""
    if attempts <= 1:
        return state
    active = _active(state)
    return replace(state, active=replace(active, reruns=active.reruns + attempts - 1))


def _finished_event(record: ToolRecord) -> AgentEvent:
    """The `tool_call_finished` event of an outcome only the session knows.

    Finished and failed calls get theirs from the Step that ran them.
    """
    status = record.status
    finished = ToolCallFinishedEvent(
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        status=status,
        error=clip(record.output) if status == "outcome_unknown" else None,
        rejection_message=record.rejection_message,
        attempts=record.attempts,
    )
    return agent_event(finished)


def _ended(state: SessionState) -> Refusal:
    why = f" ({state.end_reason})" if state.end_reason else ""
    return Refusal(
        reason="session_ended",
        message=f"session {state.session_id!r} has ended{why}; it takes no more "
        "messages or approvals. Its history stays readable (`dex-agents show`); "
        "start a new session with another ID to go on",
    )


def spend_limit_of(interrupt: Interrupt) -> float:
    """The limit a `budget` interrupt says the session reached (USD)."""
    limit = interrupt.arguments.get("spend_limit_usd")
    return float(limit) if isinstance(limit, int | float) else 0.0


def _cancel_message(active: ActiveTurn) -> str:
    """What a cancelled turn's error and its unrun calls say: the reason, if given."""
    return f"{CANCELLED}: {active.cancel_reason}" if active.cancel_reason else CANCELLED


def _limit_text(state: SessionState, options: AgentSessionOptions) -> str:
    spent, limit = state.usage.cost_usd, spend_limit(state, options) or 0.0
    return (
        f"spend limit reached: {spent:.4f} USD of {limit:.4f} USD; raise "
        "`spend_limit` to continue"
    )


def _ended_turn_error(state: SessionState) -> str:
    why = f": {state.end_reason}" if state.end_reason else ""
    return f"the session ended before this turn finished{why}"


def _remember(update_ids: list[str], update_id: str | None) -> tuple[list[str], bool]:
    """The window of Update IDs with `update_id` in it, and whether it was there."""
    if update_id is None:
        return update_ids, False
    if update_id in update_ids:
        return update_ids, True
    return [*update_ids[-(KEEP_UPDATE_IDS - 1) :], update_id], False


def _record_of(call: ToolCall, status: ToolRecordStatus) -> ToolRecord:
    return ToolRecord(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        arguments_ref=call.arguments_ref,
        status=status,
        edit=call.edit,
    )


def _record(state: SessionState, record: ToolRecord) -> SessionState:
    """The current call is done with `record`: the turn goes on to its next call.

    A call that waited for approval keeps who decided on its record, since
    the interrupt leaves the state with its turn.
    """
    active = _active(state)
    if active.interrupt_id is not None and record.resolved_by is None:
        interrupt = state.interrupts.get(active.interrupt_id)
        if interrupt is not None and interrupt.resolved_by is not None:
            record = replace(record, resolved_by=interrupt.resolved_by)
    done = replace(
        active,
        records=[*active.records, record],
        turn_records=[*active.turn_records, record],
        call_index=active.call_index + 1,
        interrupt_id=None,
        phase="tool",
    )
    return replace(state, active=done)


def _approval_step(state: SessionState, now: datetime) -> AwaitApprovalStep:
    interrupt_id = _active(state).interrupt_id
    assert interrupt_id is not None
    deadline = state.interrupts[interrupt_id].deadline
    timeout = None
    if deadline is not None:
        timeout = max(datetime.fromisoformat(deadline) - now, timedelta(0))
    return AwaitApprovalStep(interrupt_id=interrupt_id, timeout=timeout)


def _tool_step(active: ActiveTurn, options: AgentSessionOptions) -> CallToolStep:
    """The Step of the current call: a tool source may set its own attempts and limit."""
    call = active.calls[active.call_index]
    step = call.policy.step
    attempts = 1
    if step == "call_tool":
        attempts = (
            options.tool_attempts if call.step_attempts is None else call.step_attempts
        )
    timeout = options.tool_limit
    if call.step_timeout_seconds is not None:
        timeout = timedelta(seconds=call.step_timeout_seconds)
    return CallToolStep(
        turn_id=active.turn_id,
        call=call,
        tool_step=step,
        attempts=attempts,
        timeout=timeout,
    )


def _fail_turn(
    state: SessionState, reason: str, *, drop_prompts: bool = False
) -> Transition:
    """End the turn failed; its items stay pending with a note for the next turn.

    `drop_prompts`: the model refused them as too large, so sending them
    again would fail every later turn; they leave, and the note says so.
    `reason` is clipped to `SUMMARY_TEXT_LIMIT` characters: it rides in the
    state, the `turn_failed` event and the summary.
    """
    reason = clip(reason)
    active = _active(state)
    note = failure_note(active.turn_id, reason, active.turn_records)
    count = active.pending_count
    pending = list(state.pending)
    if drop_prompts:
        sent = pending[:count]
        dropped = [i for i in sent if isinstance(i, UserPrompt)]
        kept = [i for i in sent if not isinstance(i, UserPrompt)]
        pending[:count] = kept
        count = len(kept)
        note = replace(
            note,
            text=note.text
            + f"\nIts {len(dropped)} user message(s) were too large for the model "
            "and were not kept: "
            + "; ".join(repr(preview(p.text, 80)) for p in dropped),
        )
    pending.insert(count, note)
    pending = collapse_notes(pending)
    failed = TurnFailedEvent(turn_id=active.turn_id, error=reason, reruns=active.reruns)
    return Transition(
        state=_end_turn(replace(state, pending=pending), "failed", error=reason),
        events=(agent_event(failed),),
        step=PublishStep(),
    )


def _end_turn(
    state: SessionState,
    status: TurnStatus,
    *,
    final_text: str = "",
    error: str | None = None,
) -> SessionState:
    """Close the active turn: its summary goes to the store's turn log, once.

    Its interrupts (all resolved by now) leave the state; their IDs stay in
    a window so a late repeat of `resolve_interrupt` still answers False.
    """
    active = _active(state)
    summary = replace(
        turn_summary(active, status), final_text=clip(final_text), error=error
    )
    done = [i for i, v in state.interrupts.items() if v.turn_id == active.turn_id]
    return replace(
        state,
        active=None,
        unpublished=[*state.unpublished, finished_turn(summary)],
        interrupts={i: v for i, v in state.interrupts.items() if i not in done},
        resolved_interrupts=[*state.resolved_interrupts, *done][
            -KEEP_RESOLVED_INTERRUPTS:
        ],
    )

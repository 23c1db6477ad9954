"""The session's state: what the turn machine works on and continue-as-new carries.

These classes are a persisted format. A session lives for months, and each
continue-as-new hands this state to the next run as pydantic JSON, decoded by
shape: field names, types and defaults never change, or states carried by an
earlier release stop decoding (`tests/carried_states/` holds 0.1.0's).

Nothing here grows with the age of a session or with what a user sends: the
transcript, the finished turns and every user-sized value (long messages, long
tool outputs) live in the runtime store, and the state carries references.
What is left is the work in progress: the active turn, the queued items
(at most `MAX_QUEUED_MESSAGES` prompts of at most `INLINE_TEXT_LIMIT` bytes
each), the pending approvals and fixed-size windows of recent IDs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, TypedDict

from pydantic import TypeAdapter

from ._blob import BlobReference, preview
from ._json import JsonObject
from ._pending import PendingItem
from ._policy import ToolEffect
from ._records import ToolCall, ToolRecord
from ._usage import Usage

SessionStatus = Literal[
    "idle", "running", "waiting_for_approval", "budget_reached", "ended"
]
TurnStatus = Literal[
    "running", "waiting_for_approval", "completed", "failed", "cancelled"
]
TurnPhase = Literal[
    "run_model", "tool", "await_approval", "execute", "resume", "await_budget"
]

SUMMARY_TEXT_LIMIT = 1000
"""Characters of a turn's answer or tool output kept in its summary (state, snapshot)."""

REJECTION_MESSAGE_LIMIT = 10_000
"""Characters of a rejection message (`resolve_interrupt`): the most the RPCs take,
and what the state keeps of one that came past them (a recorded Signal)."""

KEEP_RESOLVED_INTERRUPTS = 200
"""IDs of interrupts that left with their turn, kept to answer a late repeat."""


@dataclass(kw_only=True)
class Interrupt:
    """An approval request for one deferred call."""

    interrupt_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    arguments: JsonObject
    effect: ToolEffect
    reason: str
    created_at: str
    deadline: str | None = None
    resolved: bool = False
    approved: bool | None = None
    rejection_message: str | None = None
    resolved_by: str | None = None
    """Who approved or rejected it, when the resolution named them (a web token's
    name, `dex-agents approve --as`); None for a deadline, an ended session, or an
    answer that named nobody."""
    arguments_ref: BlobReference | None = None
    """Set when the call's arguments are long: `arguments` is then empty and the
    whole arguments are this runtime store blob (the client's snapshot reads it)."""
    at_least_once: bool = False
    """Approved, the call runs inside the model segment (a tool of the Claude CLI,
    such as Bash), which a crash reruns: it may run more than once."""
    kind: Literal["tool_call", "budget"] = "tool_call"
    """`budget`: the session reached its spend limit and asks for a new one (its
    `arguments` say `spent_usd` and `spend_limit_usd`; no tool call waits)."""
    new_spend_limit: float | None = None
    """The limit a person set when approving a `budget` interrupt."""
    reminders: int = 0
    """Reminders sent of it so far (`interrupt_reminder`): the next one's number."""
    expired: bool = False
    """Its deadline passed with no answer (then `approved` is False): an expiry, not
    a person's refusal."""


class CallFields(TypedDict):
    """What names a waiting call wherever it is shown: its event, its notification, the inbox."""

    interrupt_id: str
    tool_call_id: str
    tool_name: str
    effect: ToolEffect
    deadline: str | None


def call_fields(interrupt: Interrupt) -> CallFields:
    """The `CallFields` of `interrupt`, to build another view of it with `**`."""
    return {
        "interrupt_id": interrupt.interrupt_id,
        "tool_call_id": interrupt.tool_call_id,
        "tool_name": interrupt.tool_name,
        "effect": interrupt.effect,
        "deadline": interrupt.deadline,
    }


@dataclass(kw_only=True)
class TurnSummary:
    """One turn as the snapshot shows it."""

    turn_id: str
    status: TurnStatus
    prompts: list[str] = field(default_factory=lambda: [])
    final_text: str = ""
    """The answer, clipped to 1,000 characters; the snapshot's `messages` hold it whole."""
    tool_calls: list[ToolRecord] = field(default_factory=lambda: [])
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    reruns: int = 0
    """Extra attempts of its model segments (a crash or an error reran them): tools
    inside the model's CLI may have run more than once in such a turn."""


@dataclass(kw_only=True)
class ActiveTurn:
    """The turn in progress, complete enough to continue after continue-as-new."""

    turn_id: str
    phase: TurnPhase = "run_model"
    segment: int = 0
    pending_count: int = 0
    """How many items of `SessionState.pending` this turn sends."""
    run_state: JsonObject = field(default_factory=lambda: {})
    partial_segment_id: str | None = None
    calls: list[ToolCall] = field(default_factory=lambda: [])
    call_index: int = 0
    records: list[ToolRecord] = field(default_factory=lambda: [])
    """Records of the current batch of calls."""
    turn_records: list[ToolRecord] = field(default_factory=lambda: [])
    """Every record of the turn, for a failure note."""
    interrupt_id: str | None = None
    prompts: list[str] = field(default_factory=lambda: [])
    """Previews of the prompts this turn sends first (its summary's `prompts`)."""
    usage: Usage = field(default_factory=Usage)
    """What this turn's segments cost so far."""
    reruns: int = 0
    """Extra attempts of this turn's model segments so far (see `TurnSummary.reruns`)."""
    paused_phase: TurnPhase = "run_model"
    """The phase a turn waiting for a new spend limit (`await_budget`) goes back to."""
    cancel_requested: bool = False
    """`cancel_turn` asked to stop it: it ends `cancelled` at the next change."""
    cancel_reason: str = ""
    cancelled_by: str | None = None


@dataclass(kw_only=True)
class SessionState:
    """Everything the session workflow knows; carried through continue-as-new."""

    session_id: str
    turn_counter: int = 0
    transcript_head: str | None = None
    pending: list[PendingItem] = field(default_factory=lambda: [])
    """Prompts and failure notes that never reached a completed transcript."""
    inbox: int = 0
    """How many of `pending`'s trailing prompts arrived after the active turn started."""
    turns: list[TurnSummary] = field(default_factory=lambda: [])
    """Only in a state carried by 0.1.x, which kept every turn: moved to the store's turn log."""
    active: ActiveTurn | None = None
    interrupts: dict[str, Interrupt] = field(default_factory=lambda: {})
    """Interrupts of the active turn: resolved ones leave with it."""
    resolved_interrupts: list[str] = field(default_factory=lambda: [])
    """IDs of the latest interrupts that left with their turn (a window), so a late
    repeat of `resolve_interrupt` is answered False rather than "unknown"."""
    usage: Usage = field(default_factory=Usage)
    unpublished: list[FinishedTurn] = field(default_factory=lambda: [])
    """Turns that ended but are not in the store's turn log yet (normally none)."""
    version: int = 0
    event_seq: int = 0
    runs: int = 1
    update_ids: list[str] = field(default_factory=lambda: [])
    """IDs of the latest state-changing Updates that succeeded, carried across continue-as-new.

    Temporal deduplicates an Update ID within one run only; a client that
    retries an Update whose run just continued as new would deliver it twice.
    """
    end_requested: bool = False
    """`end_session` was applied: no new turn starts, and the workflow completes
    once the active turn (if any) stopped."""
    end_reason: str = ""
    spend_limit: float | None = None
    """A spend limit a person set when the session reached its own (USD); None: the
    session options' `spend_limit`."""


@dataclass(frozen=True, kw_only=True)
class FinishedTurn:
    """One ended turn for the store's turn log."""

    number: int
    summary: JsonObject
    """The `TurnSummary` as JSON."""


@dataclass(frozen=True, kw_only=True)
class SessionInput:
    """Workflow input: None on a new session, the state after continue-as-new."""

    state: SessionState | None = None


_summary_json: TypeAdapter[TurnSummary] = TypeAdapter(TurnSummary)


def session_status(state: SessionState) -> SessionStatus:
    """The status a snapshot reports for `state`: running until nothing is left to do."""
    if state.end_requested and state.active is None:
        return "ended"
    if state.active is None:
        return "running" if state.inbox else "idle"
    if state.active.phase == "await_approval":
        return "waiting_for_approval"
    if state.active.phase == "await_budget":
        return "budget_reached"
    return "running"


def turn_number(turn_id: str) -> int:
    """The number in a turn ID (`turn-7` → 7)."""
    return int(turn_id.rpartition("-")[2])


def clip(text: str | None) -> str:
    """`text` cut to `SUMMARY_TEXT_LIMIT` characters for a summary."""
    return preview(text or "", SUMMARY_TEXT_LIMIT)


def _clipped_record(record: ToolRecord) -> ToolRecord:
    """A record as a summary keeps it: the output clipped (the transcript has it whole)."""
    return replace(record, output=clip(record.output)) if record.output else record


def turn_summary(active: ActiveTurn, status: TurnStatus | None) -> TurnSummary:
    """The summary of the active turn; `status` None derives it from the phase."""
    if status is None:
        status = (
            "waiting_for_approval"
            if active.phase in ("await_approval", "await_budget")
            else "running"
        )
    return TurnSummary(
        turn_id=active.turn_id,
        status=status,
        prompts=list(active.prompts),
        tool_calls=[_clipped_record(r) for r in active.turn_records],
        usage=active.usage,
        reruns=active.reruns,
    )


def finished_turn(summary: TurnSummary) -> FinishedTurn:
    """The turn log entry of an ended turn."""
    return FinishedTurn(
        number=turn_number(summary.turn_id),
        summary=_summary_json.dump_python(summary, mode="json"),
    )


def migrate_carried_state(state: SessionState) -> SessionState:
    """A state carried by an earlier release, brought to this one's bounds.

    0.1.x kept every turn's summary in `turns` and every interrupt ever made:
    the finished turns move to `unpublished` (the next publish writes them to
    the store's turn log), the active turn's summary moves into `ActiveTurn`,
    and interrupts of finished turns leave. A state of this release comes back
    equal.
    """
    active, unpublished = state.active, state.unpublished
    if state.turns:
        finished = state.turns
        last = finished[-1]
        if active is not None and last.turn_id == active.turn_id:
            finished = finished[:-1]
            active = replace(
                active, prompts=[preview(p) for p in last.prompts], usage=last.usage
            )
        unpublished = [
            *unpublished,
            *(
                finished_turn(
                    replace(
                        t,
                        prompts=[preview(p) for p in t.prompts],
                        tool_calls=[_clipped_record(r) for r in t.tool_calls],
                    )
                )
                for t in finished
            ),
        ]
    active_turn = active.turn_id if active is not None else None
    kept = {i: v for i, v in state.interrupts.items() if v.turn_id == active_turn}
    left = [i for i in state.interrupts if i not in kept]
    return replace(
        state,
        turns=[],
        active=active,
        unpublished=unpublished,
        interrupts=kept,
        resolved_interrupts=[*state.resolved_interrupts, *left][
            -KEEP_RESOLVED_INTERRUPTS:
        ],
    )

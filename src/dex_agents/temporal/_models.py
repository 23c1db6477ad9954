"""Workflow state and Step payloads: small, typed, and free of transcripts.

Nothing here grows with the age of a session or with what a user sends: the
transcript, the finished turns and every user-sized value (long messages, long
tool outputs) live in the runtime store, and history carries references.
What is left is the work in progress: the active turn, the queued items
(at most `MAX_QUEUED_MESSAGES` prompts of at most `INLINE_TEXT_LIMIT` bytes
each), the pending approvals and fixed-size windows of recent IDs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..session import (
    AgentEvent,
    BlobReference,
    ImageReference,
    JsonObject,
    ModelCallMetadata,
    PendingItem,
    ToolCall,
    ToolEffect,
    ToolRecord,
    Usage,
)

SessionStatus = Literal["idle", "running", "waiting_for_approval"]
TurnStatus = Literal["running", "waiting_for_approval", "completed", "failed"]
TurnPhase = Literal["run_model", "tool", "await_approval", "execute", "resume"]


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


@dataclass(frozen=True, kw_only=True)
class SessionInput:
    """Workflow input: None on a new session, the state after continue-as-new."""

    state: SessionState | None = None


@dataclass(frozen=True, kw_only=True)
class UserMessageInput:
    """Update argument of `send_user_message`."""

    text: str
    """The whole text, or its preview when `text_ref` is set."""
    images: list[ImageReference] = field(default_factory=lambda: [])
    """Media store references sent after the text, in this order."""
    text_ref: BlobReference | None = None
    """The runtime store blob holding the whole text of a long message."""


@dataclass(frozen=True, kw_only=True)
class ResolveInterruptInput:
    """Update argument of `resolve_interrupt`."""

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None


@dataclass(frozen=True, kw_only=True)
class ResumeInput:
    """What a resumed RunModel needs: references and the records, never the transcript."""

    run_state: JsonObject
    partial_segment_id: str | None
    records: list[ToolRecord]


@dataclass(frozen=True, kw_only=True)
class RunModelInput:
    """Input of the `run_model` activity."""

    session_id: str
    turn_id: str
    step_execution_id: str
    transcript_head: str | None
    pending: list[PendingItem]
    resume: ResumeInput | None = None
    session_events: list[AgentEvent] = field(default_factory=lambda: [])
    """Session events not published yet (a turn's start), written before the segment runs."""
    first_seq: int = 0
    """The session event sequence number before `session_events`."""


@dataclass(frozen=True, kw_only=True)
class RunModelOutput:
    """Result of the `run_model` activity: references and small facts only."""

    kind: Literal["turn_completed", "tool_calls_requested"]
    segment_id: str
    calls: list[ToolCall] = field(default_factory=lambda: [])
    run_state: JsonObject = field(default_factory=lambda: {})
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    metadata: ModelCallMetadata = field(default_factory=ModelCallMetadata)


@dataclass(frozen=True, kw_only=True)
class CallToolInput:
    """Input of the tool Step activities."""

    session_id: str
    turn_id: str
    step_execution_id: str
    call: ToolCall


@dataclass(frozen=True, kw_only=True)
class CallToolOutput:
    """Result of a tool Step: a finished or failed outcome (errors raise instead)."""

    output: str
    """The whole output, or its preview when `output_ref` is set."""
    is_error: bool = False
    finished_by_resumed_turn: bool = False
    output_ref: BlobReference | None = None
    """The runtime store blob holding a long output whole."""
    images: list[ImageReference] = field(default_factory=lambda: [])
    """References of the result's images (the bytes stay in the media store)."""
    attempt: int = 0
    """The attempt that produced it (0 in results recorded before it was sent)."""


@dataclass(frozen=True, kw_only=True)
class PublishInput:
    """Input of the local activity that projects the snapshot and writes session events."""

    session_id: str
    snapshot: JsonObject
    """The live `AgentSnapshot` as JSON (the store keeps JSON)."""
    events: list[AgentEvent]
    turn_id: str
    first_seq: int
    finished: list[FinishedTurn] = field(default_factory=lambda: [])
    """Turns that ended since the last publish: appended to the store's turn log."""


@dataclass(frozen=True, kw_only=True)
class FinishedTurn:
    """One ended turn for the store's turn log."""

    number: int
    summary: JsonObject
    """The `TurnSummary` as JSON."""


@dataclass(frozen=True, kw_only=True)
class EngineInfo:
    """How the engine runs a session's workflow (the `engine_info` Query)."""

    sandboxed: bool
    """Whether the workflow code runs in Temporal's sandbox."""
    runs: int
    """Runs of the session so far: 1 plus each continue-as-new."""

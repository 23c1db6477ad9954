"""Workflow state and Step payloads: small, typed, and free of transcripts.

Nothing here grows with the age of a session or with what a user sends: the
transcript, the finished turns and every user-sized value (long messages, long
tool outputs) live in the runtime store, and history carries references.

The state itself (`SessionState` and its parts, the continue-as-new format)
belongs to the engine-free turn machine in `dex_agents.session`; it is
re-exported here under the names the engine has always used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ..session import AgentEvent, ToolCall
from ..session._blob import BlobReference
from ..session._json import JsonObject
from ..session._media import ImageReference
from ..session._notification import InterruptNotification
from ..session._pending import PendingItem, UserPrompt
from ..session._records import ToolRecord
from ..session._state import (
    ActiveTurn,
    FinishedTurn,
    Interrupt,
    SessionInput,
    SessionState,
    SessionStatus,
    TurnPhase,
    TurnStatus,
    TurnSummary,
)
from ..session._turns import (
    CallToolStep,
    RunModelStep,
    Transition,
    calls_requested,
    model_answered,
    record_outcome,
    step_execution_id,
)
from ..session._usage import ModelCallMetadata, Usage
from ._parked_route import Parked


@dataclass(frozen=True, kw_only=True)
class UserMessageInput:
    """Update argument of `send_user_message`."""

    text: str
    """The whole text, or its preview when `text_ref` is set."""
    images: list[ImageReference] = field(default_factory=lambda: [])
    """Media store references sent after the text, in this order."""
    text_ref: BlobReference | None = None
    """The runtime store blob holding the whole text of a long message."""

    @property
    def prompt(self) -> UserPrompt:
        """The message as the session queues it."""
        return UserPrompt(
            text=self.text, text_ref=self.text_ref, images=tuple(self.images)
        )


@dataclass(frozen=True, kw_only=True)
class ResolveInterruptInput:
    """Update argument of `resolve_interrupt`."""

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None
    resolved_by: str | None = None
    """Who decided (a web token's name, `dex-agents approve --as`), recorded on the
    interrupt, the call's record and the `interrupt_resolved` event."""
    edited_input: JsonObject | None = None
    """Approve with this input instead of the model's (a person's edit): the runner
    checks it against the tool's schema and decides its policy again first."""
    edited_input_ref: BlobReference | None = None
    """The runtime store blob of a long `edited_input` (then `edited_input` is None)."""
    new_spend_limit: float | None = None
    """Approve a `budget` interrupt (the session reached its spend limit) with this
    new limit, in USD; it must be above what the session spent."""
    expires_at: str | None = None
    """When a client that gave up waiting stops answering for it (ISO 8601, UTC).

    Temporal keeps an Update no worker took in the server's memory and hands it
    to the next worker; past this time the workflow refuses it, so a call that
    said nothing was applied never applies later. None: it never expires."""

    @property
    def edited(self) -> bool:
        """Whether the resolution approves an edited input."""
        return self.edited_input is not None or self.edited_input_ref is not None


@dataclass(frozen=True, kw_only=True)
class _SessionStepInput:
    """What every Step's input names first: the session it works for."""

    session_id: str


@dataclass(frozen=True, kw_only=True)
class _StepInput(_SessionStepInput):
    """The input of a model or tool Step: the turn and Step its events belong to."""

    turn_id: str
    step_execution_id: str


@dataclass(frozen=True, kw_only=True)
class CheckEditInput(_SessionStepInput):
    """Local activity argument: check a person's edit of a waiting call's input."""

    turn_id: str
    call: ToolCall
    edited_input: JsonObject | None = None
    edited_input_ref: BlobReference | None = None


@dataclass(frozen=True, kw_only=True)
class _ParkStepInput(_SessionStepInput):
    """The input of a Step sent to a park: it names the deferring segment parked."""

    segment_id: str


@dataclass(frozen=True, kw_only=True)
class ReleaseParkInput(_ParkStepInput):
    """Input of the Step that closes a park its turn no longer needs."""


@dataclass(frozen=True, kw_only=True)
class PrimeParkInput(_ParkStepInput):
    """Input of the Step that lets a park go on with an approved call.

    `call` is the call as its tool Step runs it (never with its input by reference).
    """

    call: ToolCall


@dataclass(frozen=True, kw_only=True)
class NotifyInput:
    """Input of the notification Step: what `on_interrupt` is told."""

    notification: InterruptNotification
    arguments_ref: BlobReference | None = None
    """The interrupt's long arguments: the Step previews them from the store."""


@dataclass(frozen=True, kw_only=True)
class CheckEditOutput:
    """The edited call as the runner decided it, or why the edit is refused."""

    call: ToolCall | None = None
    """The call with the edited input (by reference when long) and its policy."""
    problem: str | None = None
    field: str = ""
    """The input field at fault when refused ("" for the input as a whole)."""


@dataclass(frozen=True, kw_only=True)
class CancelTurnInput:
    """Update argument of `cancel_turn`."""

    reason: str = ""
    cancelled_by: str | None = None
    """Who stopped it, recorded on the turn's `turn_cancelled` event and its note."""
    expires_at: str | None = None
    """When a client that gave up waiting stops answering for it (ISO 8601, UTC).

    Temporal keeps an Update no worker took in the server's memory and hands it
    to the next worker; past this time the workflow refuses it, so a call that
    said nothing was applied never applies later. None: it never expires."""


@dataclass(frozen=True, kw_only=True)
class EndSessionInput:
    """Update argument of `end_session`."""

    reason: str = ""
    force: bool = False
    """End a session with work in progress (see `dex_agents.session._turns.end_session`)."""
    expires_at: str | None = None
    """When a client that gave up waiting stops answering for it (ISO 8601, UTC).

    Temporal keeps an Update no worker took in the server's memory and hands it
    to the next worker; past this time the workflow refuses it, so a call that
    said nothing was applied never applies later. None: it never expires."""


@dataclass(frozen=True, kw_only=True)
class ResumeInput:
    """What a resumed RunModel needs: references and the records, never the transcript."""

    run_state: JsonObject
    partial_segment_id: str | None
    records: list[ToolRecord]


@dataclass(frozen=True, kw_only=True)
class RunModelInput(_StepInput):
    """Input of the `run_model` activity."""

    transcript_head: str | None
    pending: list[PendingItem]
    resume: ResumeInput | None = None
    session_events: list[AgentEvent] = field(default_factory=lambda: [])
    """Session events not published yet (a turn's start), written before the segment runs."""
    first_seq: int = 0
    """The session event sequence number before `session_events`."""
    max_budget_usd: float | None = None
    """What is left of the spend limit: the segment's budget (None: no limit)."""
    attempt_offset: int = 0
    """Attempts this segment already had elsewhere: 1 for a cold Step after its
    parked Step failed (its first attempt counts as the second)."""

    @classmethod
    def for_step(
        cls,
        step: RunModelStep,
        *,
        session_id: str,
        events: list[AgentEvent],
        first_seq: int,
    ) -> RunModelInput:
        """The input of a RunModel Step; the events not written yet go with it."""
        resume = None
        if step.resume is not None:
            resume = ResumeInput(
                run_state=step.resume.run_state,
                partial_segment_id=step.resume.partial_segment_id,
                records=list(step.resume.records),
            )
        return cls(
            session_id=session_id,
            turn_id=step.turn_id,
            step_execution_id=step_execution_id(step),
            transcript_head=step.transcript_head,
            pending=list(step.pending),
            resume=resume,
            session_events=events,
            first_seq=first_seq,
            max_budget_usd=step.max_budget_usd,
        )


@dataclass(frozen=True, kw_only=True)
class RunModelOutput:
    """Result of the `run_model` activity: references and small facts only."""

    kind: Literal["turn_completed", "tool_calls_requested", "cancelled"]
    """`cancelled`: the attempt stopped on `cancel_turn`; `final_text` is what it had
    streamed (clipped)."""
    segment_id: str
    calls: list[ToolCall] = field(default_factory=lambda: [])
    run_state: JsonObject = field(default_factory=lambda: {})
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    metadata: ModelCallMetadata = field(default_factory=ModelCallMetadata)
    attempt: int = 0
    """The attempt that produced it (0 in results recorded before it was sent)."""
    parked_on: str | None = None
    """For `tool_calls_requested`: the task queue of the worker that parked the
    resumed segment (see `_parking`), None when none was parked."""

    def applied_to(self, state: SessionState) -> Transition:
        """What the segment's end does to the turn: it ends, or goes to its calls."""
        if self.kind == "turn_completed":
            return model_answered(
                state=state,
                segment_id=self.segment_id,
                final_text=self.final_text,
                usage=self.usage,
                attempt=self.attempt,
            )
        return calls_requested(
            state,
            segment_id=self.segment_id,
            calls=self.calls,
            run_state=self.run_state,
            usage=self.usage,
            attempt=self.attempt,
        )


@dataclass(frozen=True, kw_only=True)
class CallToolInput(_StepInput):
    """Input of the tool Step activities."""

    call: ToolCall
    publish: PublishInput | None = None
    """The call's approval, published by the Step before the call runs (instead of
    a publish round trip before the Step)."""

    @classmethod
    def for_step(
        cls,
        step: CallToolStep,
        *,
        session_id: str,
        publish: PublishInput | None = None,
    ) -> CallToolInput:
        """The input of a tool Step; a publish not made yet goes with it."""
        return cls(
            session_id=session_id,
            turn_id=step.turn_id,
            step_execution_id=step_execution_id(step),
            call=step.call,
            publish=publish,
        )


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
    parked_on: str | None = None
    """For `tool_calls_requested`: the task queue of the worker that parked the
    resumed segment (see `_parking`), None when none was parked."""

    def recorded_in(self, state: SessionState, *, attempts: int) -> Transition:
        """The call's record from this result (`attempts` is 0 before the patch that counts them)."""
        return record_outcome(
            state,
            output=self.output,
            attempts=attempts,
            is_error=self.is_error,
            output_ref=self.output_ref,
            finished_by_resumed_turn=self.finished_by_resumed_turn,
            images=tuple(self.images),
        )


@dataclass(frozen=True, kw_only=True)
class PublishInput(_SessionStepInput):
    """Input of the local activity that projects the snapshot and writes session events."""

    snapshot: JsonObject
    """The live `AgentSnapshot` as JSON (the store keeps JSON)."""
    events: list[AgentEvent]
    turn_id: str
    first_seq: int
    finished: list[FinishedTurn] = field(default_factory=lambda: [])
    """Turns that ended since the last publish: appended to the store's turn log."""


@dataclass(frozen=True, kw_only=True)
class RunInput(SessionInput):
    """A run's input: the carried state, and the park of its next segment if any.

    The park crosses continue-as-new with the state, so a decision inside the
    window still takes it when the session continued as new while it waited.
    """

    parked: Parked | None = None


@dataclass(frozen=True, kw_only=True)
class EngineInfo:
    """How the engine runs a session's workflow (the `engine_info` Query)."""

    sandboxed: bool
    """Whether the workflow code runs in Temporal's sandbox."""
    runs: int = 1
    """Runs of the session so far: 1 plus each continue-as-new."""
    parked_on: str | None = None
    """The task queue of the worker holding the session's next segment parked."""
    parked_until: datetime | None = None
    """When that park's window ends (a decision after it resumes cold)."""


__all__ = [
    "ActiveTurn",
    "CallToolInput",
    "CallToolOutput",
    "CancelTurnInput",
    "CheckEditInput",
    "CheckEditOutput",
    "EndSessionInput",
    "EngineInfo",
    "FinishedTurn",
    "Interrupt",
    "NotifyInput",
    "PublishInput",
    "PrimeParkInput",
    "ReleaseParkInput",
    "ResolveInterruptInput",
    "ResumeInput",
    "RunInput",
    "RunModelInput",
    "RunModelOutput",
    "SessionInput",
    "SessionState",
    "SessionStatus",
    "TurnPhase",
    "TurnStatus",
    "TurnSummary",
    "UserMessageInput",
]

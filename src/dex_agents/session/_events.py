"""Live session events: what clients follow while a turn runs.

Events never go through workflow history. They are appended to the runtime
store's event log under `(session_id, turn_id, step_execution_id, attempt, seq)`.
A retried attempt re-sends its deltas, so readers group text by
`(turn_id, step_execution_id, attempt)` and keep the latest attempt.

Each event type has a typed payload below (`TextDeltaEvent`, ...,
`SessionEndedEvent`, the `EventPayload` union): producers build one and turn
it into an `AgentEvent` with `agent_event`, readers turn a stored record back
into one with `record.payload()` (`event_payload`). Every stored event carries a `timestamp`
(ISO 8601, UTC) in its data: the activity that writes it stamps it when it is
emitted, and the workflow stamps its own events with `workflow.now()`, so a
replay writes the same time. `docs/events.md` is the table of them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Annotated, Literal, Protocol

from pydantic import Field, TypeAdapter, ValidationError

from ._blob import BlobReference
from ._json import JsonObject

AgentEventType = Literal[
    "text_delta",
    "reasoning_delta",
    "tool_call_started",
    "tool_call_attempt_failed",
    "tool_call_finished",
    "segment_rerun",
    "model_retry",
    "turn_started",
    "turn_completed",
    "turn_failed",
    "turn_cancelled",
    "interrupt_created",
    "interrupt_resolved",
    "session_ended",
]

ToolOutcomeStatus = Literal[
    "finished",
    "failed",
    "outcome_unknown",
    "rejected",
    "expired",
    "cancelled",
    "skipped",
]
"""How a tool call ended, as `tool_call_finished` says it (its record says the same)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentEvent:
    """One live event as a runner or the session emits it (before it is keyed)."""

    type: AgentEventType
    data: JsonObject = field(default_factory=lambda: {})

    def payload(self) -> EventPayload | None:
        """The typed payload (`TextDeltaEvent`, ...); None for a shape its type does not fit."""
        return event_payload(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class EventRecord:
    """An event as stored: keyed, ordered by `cursor` within its session."""

    session_id: str
    turn_id: str
    step_execution_id: str
    attempt: int
    seq: int
    type: AgentEventType
    data: JsonObject
    cursor: int = 0
    """Position in the session's log, assigned by the store; read after it to follow."""

    @property
    def timestamp(self) -> str:
        """When the event happened (ISO 8601, UTC); empty for events written before 0.2."""
        value = self.data.get("timestamp")
        return value if isinstance(value, str) else ""

    def payload(self) -> EventPayload | None:
        """The typed payload (`TextDeltaEvent`, ...); None for a shape its type does not fit.

        The record's `data` still holds such an event (a runner's own, of an
        unexpected shape).
        """
        return event_payload(self)


class EventSink(Protocol):
    """Where a runner sends its live events during one Step attempt."""

    def emit(self, event: AgentEvent) -> None:
        """Queue one event; it must not block the segment."""
        ...


# ----- typed payloads ---------------------------------------------------------
#
# Every payload has the event's `type` and the `timestamp` its writer stamped
# (`_Payload`). Long values never ride in an event: a tool output or call
# input over 8 KiB is a preview plus a `BlobReference` into the runtime store
# (`RuntimeStore.get_blob(session_id, ref.blob_id)` reads it whole).


@dataclass(frozen=True, kw_only=True, slots=True)
class _Payload:
    """What every payload has; each one narrows `type` to its own."""

    type: AgentEventType
    timestamp: str = ""
    """Stored last in the event's data, after the payload's own fields."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _ToolCallPayload(_Payload):
    """An event of one tool call's run, named by the call's ID and its tool."""

    tool_call_id: str
    tool_name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class _TurnPayload(_Payload):
    """An event of one turn's life."""

    turn_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDeltaEvent(_Payload):
    """A piece of the agent's answer, as the model streams it."""

    type: Literal["text_delta"] = "text_delta"
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ReasoningDeltaEvent(_Payload):
    """A piece of the model's visible reasoning."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStartedEvent(_ToolCallPayload):
    """A tool call starts: inside the model segment, or in its own Step attempt."""

    type: Literal["tool_call_started"] = "tool_call_started"
    arguments: JsonObject = field(default_factory=lambda: {})
    """The call's input; empty when it is long and `arguments_ref` holds it."""
    arguments_ref: BlobReference | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallAttemptFailedEvent(_ToolCallPayload):
    """One attempt of a tool Step raised; `retrying` says whether another follows."""

    type: Literal["tool_call_attempt_failed"] = "tool_call_attempt_failed"
    attempt: int
    error: str
    """The tool's error, as `ExceptionType: message`."""
    retrying: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallFinishedEvent(_ToolCallPayload):
    """How a tool call ended: one per call (per attempt, for a call its Step reran)."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    status: ToolOutcomeStatus
    output: str = ""
    """What the tool returned (its error text when `failed`); a preview when
    `output_ref` holds the whole output."""
    output_ref: BlobReference | None = None
    error: str | None = None
    """`failed`: the tool's error; `outcome_unknown`: why nothing was reported
    (the error the tool raised, or the crash or timeout of its Step)."""
    rejection_message: str | None = None
    """`rejected` and `expired`: what the agent reads instead of a result."""
    attempts: int = 0
    """Attempts its Step ran (0 for a call that ran inside the model segment)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SegmentRerunEvent(_Payload):
    """A model segment runs again (attempt 2 or later) after a crash or an error.

    Tools that run inside the model's CLI (Bash, Write, ...) may run again in
    it: they run at least once, not at most once.
    """

    type: Literal["segment_rerun"] = "segment_rerun"
    step_execution_id: str
    attempt: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRetryEvent(_Payload):
    """The model's API failed a request and the runner's framework tries it again.

    Claude Code retries a failed Messages API request itself, with backoff, up
    to `max_retries` times (minutes in all) before the segment fails: without
    this event, a turn whose API cannot be reached looks like a turn that is
    slow. Nothing reruns: the same segment waits and asks again.
    """

    type: Literal["model_retry"] = "model_retry"
    attempt: int
    """The retry that comes next (1 for the first)."""
    max_retries: int
    retry_in_ms: int
    """How long the framework waits before it asks again."""
    error: str
    """The framework's word for it: `overloaded`, `rate_limit`,
    `server_error`, `unknown` (no answer at all: a connection error), ..."""
    error_status: int | None = None
    """The HTTP status of the API's answer; None when none came."""

    def text(self) -> str:
        """What it means for a person: `the model API could not be reached; ...`."""
        if self.error_status is None:
            what = "the model API could not be reached"
        else:
            what = f"the model API answered HTTP {self.error_status} ({self.error})"
        return (
            f"{what}; asking again in {self.retry_in_ms / 1000:.1f} s (retry "
            f"{self.attempt} of {self.max_retries})"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStartedEvent(_TurnPayload):
    """A turn starts; it sends every message queued until now."""

    type: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCompletedEvent(_TurnPayload):
    """A turn answered; `reruns` counts extra attempts of its model segments."""

    type: Literal["turn_completed"] = "turn_completed"
    reruns: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnFailedEvent(_TurnPayload):
    """A turn failed; its messages stay queued with a note for the next turn."""

    type: Literal["turn_failed"] = "turn_failed"
    error: str
    reruns: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCancelledEvent(_TurnPayload):
    """A turn was stopped by `cancel_turn`; the next message starts a new turn."""

    type: Literal["turn_cancelled"] = "turn_cancelled"
    reason: str = ""
    cancelled_by: str | None = None
    reruns: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class InterruptCreatedEvent(_Payload):
    """A tool call waits for a person's approval."""

    type: Literal["interrupt_created"] = "interrupt_created"
    interrupt_id: str
    tool_call_id: str
    tool_name: str
    arguments: JsonObject = field(default_factory=lambda: {})
    arguments_ref: BlobReference | None = None
    effect: str = "unclassified"
    """The call's `ToolEffect`."""
    at_least_once: bool = False
    """Approved, it runs inside the model's CLI, where a rerun segment can run it again."""
    deadline: str | None = None
    kind: str = "tool_call"
    """`budget`: the session reached its spend limit and asks for a new one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InterruptResolvedEvent(_Payload):
    """An approval was answered: by a person, by its deadline, or by ending the session."""

    type: Literal["interrupt_resolved"] = "interrupt_resolved"
    interrupt_id: str
    approved: bool
    rejection_message: str | None = None
    resolved_by: str | None = None
    """Who decided, when the resolution named them; None for a deadline or an end."""
    expired: bool = False
    """The deadline passed with no answer: nobody refused the call."""
    cancelled: bool = False
    """The approval was closed because its turn was cancelled (`cancel_turn`)."""
    edited_arguments: JsonObject | None = None
    """Approved with an edited input: the input that runs (empty when long, then
    `edited_arguments_ref` holds it). The model's own is in `original_arguments`."""
    edited_arguments_ref: BlobReference | None = None
    original_arguments: JsonObject | None = None
    """What the model asked for, when a person edited it (see `edited_arguments`)."""
    original_arguments_ref: BlobReference | None = None
    edited_by: str | None = None
    """Who edited the input (the resolution's `resolved_by`)."""
    new_spend_limit: float | None = None
    """The new limit of an approved `budget` interrupt (USD)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionEndedEvent(_Payload):
    """The session ended (`SessionClient.end`); its workflow completes after this."""

    type: Literal["session_ended"] = "session_ended"
    reason: str = ""


EventPayload = Annotated[
    TextDeltaEvent
    | ReasoningDeltaEvent
    | ToolCallStartedEvent
    | ToolCallAttemptFailedEvent
    | ToolCallFinishedEvent
    | SegmentRerunEvent
    | ModelRetryEvent
    | TurnStartedEvent
    | TurnCompletedEvent
    | TurnFailedEvent
    | TurnCancelledEvent
    | InterruptCreatedEvent
    | InterruptResolvedEvent
    | SessionEndedEvent,
    Field(discriminator="type"),
]
"""The typed payload of an event, discriminated by its `type`."""

_PAYLOAD: TypeAdapter[EventPayload] = TypeAdapter(EventPayload)

_SET_ONLY = (
    "expired",
    "cancelled",
    "edited_arguments",
    "edited_arguments_ref",
    "original_arguments",
    "original_arguments_ref",
    "edited_by",
    "new_spend_limit",
)
"""Fields added after 0.1 that events carry only when set: the events of an approval
without an edit or expiry stay what they were."""


def agent_event(payload: EventPayload) -> AgentEvent:
    """The `AgentEvent` that carries `payload` (an empty timestamp is left for the writer)."""
    data = _PAYLOAD.dump_python(payload, mode="json")
    del data["type"]
    for name in _SET_ONLY:
        if data.get(name) in (None, False):
            data.pop(name, None)
    if payload.type == "interrupt_created" and data.get("kind") == "tool_call":
        del data["kind"]  # the events of a tool call's approval stay what they were
    if timestamp := data.pop("timestamp"):
        data["timestamp"] = timestamp  # after the payload's own fields
    return AgentEvent(type=payload.type, data=data)


def event_payload(event: EventRecord | AgentEvent) -> EventPayload | None:
    """The typed payload of a stored (or emitted) event.

    None when the data does not fit its type: a runner's own event of an
    unexpected shape. The record's `data` still holds it.
    """
    try:
        return _PAYLOAD.validate_python({**event.data, "type": event.type})
    except ValidationError:
        return None


def event_time(at: datetime) -> str:
    """How events write a moment: ISO 8601 in UTC, to the millisecond."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds")


def parsed_time(text: str) -> datetime | None:
    """The moment ISO 8601 `text` names (in UTC when it names no offset), or None."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def stamped(event: AgentEvent, at: datetime) -> AgentEvent:
    """`event` with its `timestamp` set to `at`, unless it has one already."""
    if event.data.get("timestamp"):
        return event
    return replace(event, data={**event.data, "timestamp": event_time(at)})

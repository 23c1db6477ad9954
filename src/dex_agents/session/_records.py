"""Tool calls, their records, stored messages, and the deferred execution context."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ._blob import BlobReference, preview
from ._json import JsonObject, JsonValue
from ._media import ImageReference
from ._policy import ToolPolicy

ToolRecordStatus = Literal[
    "finished",
    "failed",
    "rejected",
    "expired",
    "cancelled",
    "outcome_unknown",
    "skipped",
]
"""How a deferred call ended.

`expired` marks a call whose approval deadline passed with no answer: nobody
refused it, and the model is told so. `cancelled` marks a call that never ran
because its turn was cancelled (`cancel_turn`) first. `skipped` marks a later call of one reply
that never ran because an earlier call of the same reply was rejected, expired
or did not finish.
"""

EDITED_NOTE = "A person edited this call's input before approving it; it ran with"
"""How the model learns that what ran is not what it asked for (then the input)."""
EDITED_NOTE_LIMIT = 2000
"""Characters of the edited input the note shows: the tool saw it whole."""

MessageRole = Literal["user", "assistant", "tool", "note"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One tool call the model asked for, classified by the runner."""

    tool_call_id: str
    tool_name: str
    arguments: JsonObject
    policy: ToolPolicy
    reason: str = ""
    """Why the call needs approval, shown with its interrupt."""
    metadata: JsonObject = field(default_factory=lambda: {})
    """Runner-owned facts about the call (for example where it runs)."""
    step_timeout_seconds: float | None = None
    """The tool Step's timeout for this call (a source tool's); None: the session's."""
    step_attempts: int | None = None
    """Attempts of a retried tool Step for this call; None: the session's."""
    arguments_ref: BlobReference | None = None
    """Set while the call travels through the engine with long arguments: `arguments`
    is then empty and the JSON of the whole arguments is this runtime store blob.
    Runners and tool handlers only see whole calls."""
    edit: ToolCallEdit | None = None
    """Set when a person edited the input when approving: `arguments` are then the
    edited input (what runs) and this keeps what the model asked for."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallEdit:
    """What the model asked for, kept when a person approved an edited input instead."""

    original_arguments: JsonObject
    original_arguments_ref: BlobReference | None = None
    """Set when the original input was long (see `ToolCall.arguments_ref`)."""
    edited_by: str | None = None
    """Who edited (the resolution's `resolved_by`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """What a runner's tool execution returned in its Step."""

    output: str
    is_error: bool = False
    finished_by_resumed_turn: bool = False
    """The call really runs inside the resumed model segment (a CLI tool)."""
    images: tuple[ImageReference, ...] = ()
    """Images of the result, in the media store; the model sees them after `output`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolRecord:
    """The final record of a deferred call; a resumed segment replays it, never reruns it."""

    tool_call_id: str
    tool_name: str
    arguments: JsonObject
    status: ToolRecordStatus
    output: str | None = None
    """Output text for `finished`, the failure message for `failed`."""
    rejection_message: str | None = None
    attempts: int = 0
    finished_by_resumed_turn: bool = False
    images: tuple[ImageReference, ...] = ()
    """Images of a `finished` result, replayed to the model after `output`."""
    output_ref: BlobReference | None = None
    """Set while the record travels through the engine: `output` is then a preview and
    the whole output is this runtime store blob. Runners only see whole records."""
    arguments_ref: BlobReference | None = None
    """The call's `arguments_ref`: its arguments are then this blob (see `ToolCall`)."""
    resolved_by: str | None = None
    """Who approved or rejected the call (its interrupt's `resolved_by`): kept on the
    record because the interrupt leaves the state with its turn."""
    edit: ToolCallEdit | None = None
    """The call's `edit`: `arguments` ran in place of `edit.original_arguments`."""

    @property
    def edited_note(self) -> str:
        """The note the model reads after the result of an edited call ("" if none)."""
        if self.edit is None:
            return ""
        shown = json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)
        if len(shown) > EDITED_NOTE_LIMIT:
            shown = f"{shown[:EDITED_NOTE_LIMIT]}…"
        return f"{EDITED_NOTE}: {shown}"

    @property
    def model_text(self) -> str:
        """The text the model reads for this call."""
        match self.status:
            case "finished" | "failed":
                note = self.edited_note
                return f"{self.output or ''}\n\n({note})" if note else self.output or ""
            case "rejected":
                return f"The user rejected this call: {self.rejection_message or ''}"
            case "expired":
                return (
                    f"{self.tool_name} did not run: its approval expired "
                    f"({self.rejection_message or 'no answer before the deadline'}). "
                    "Nobody refused it; ask the user before calling it again."
                )
            case "cancelled":
                return (
                    f"{self.tool_name} did not run: the user stopped the turn "
                    f"({self.rejection_message or 'cancelled'})."
                )
            case "outcome_unknown":
                # The last error (what the tool raised, or the crash or timeout
                # that ended its Step) is often what the model needs to say why.
                last = f" (last error: {preview(self.output)})" if self.output else ""
                return (
                    f"The outcome of {self.tool_name} is unknown: it started but did "
                    f"not report a result{last}. Check before calling it again."
                )
            case "skipped":
                return f"{self.tool_name} did not run because an earlier call did not finish."


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredMessage:
    """One message of a session's transcript as the store keeps it.

    `item` is the framework's own stored format (for example
    `{"kind": "claude_transcript", ...}` or `{"kind": "user_prompt", ...}`);
    `role` and `text` are a readable projection for snapshots and clients.
    """

    role: MessageRole
    text: str
    item: JsonObject


@dataclass(frozen=True, kw_only=True, slots=True)
class DeferredToolExecution:
    """The context of a deferred call running in its tool Step.

    Every attempt of one Step shares `step_execution_id` and `idempotency_key`,
    so a handler can derive provider call IDs that a retry reuses. The heartbeat
    checkpoint carries a small marker from one attempt to the next (a connector
    keeps its fence marker there): what an attempt last recorded with
    `record_heartbeat_checkpoint` is `heartbeat_checkpoint` in the next one.
    """

    flow_id: str
    turn_id: str
    tool_call_id: str
    step_execution_id: str
    attempt: int
    """The Step's attempt, from 1."""
    idempotency_key: str
    heartbeat_checkpoint: JsonValue | None = None
    """What an earlier attempt of this Step last recorded, or None.

    Best effort: the engine sends checkpoints with its (throttled) heartbeats,
    so one recorded just before a crash may be lost. Use it to resume or to
    reconcile, never as proof that an earlier attempt did not act.
    """
    checkpoint_recorder: Callable[[JsonValue], None] | None = field(
        default=None, repr=False, compare=False
    )
    """How the engine records a checkpoint; None outside a tool Step."""

    def record_heartbeat_checkpoint(self, value: JsonValue) -> None:
        """Keep `value` as this Step's checkpoint for a later attempt to read.

        Outside an engine's tool Step (a test calling a handler directly) the
        value is dropped: there is no later attempt to read it.
        """
        if self.checkpoint_recorder is not None:
            self.checkpoint_recorder(value)


_current_execution: contextvars.ContextVar[DeferredToolExecution | None] = (
    contextvars.ContextVar("dex_agents_deferred_tool_execution", default=None)
)


def current_deferred_tool_execution() -> DeferredToolExecution | None:
    """Inside a tool handler: the Step's execution context, or None when run inline."""
    return _current_execution.get()


def set_current_deferred_tool_execution(
    execution: DeferredToolExecution | None,
) -> contextvars.Token[DeferredToolExecution | None]:
    """Bind `execution` for the running tool Step; reset with the returned token."""
    return _current_execution.set(execution)


def reset_current_deferred_tool_execution(
    token: contextvars.Token[DeferredToolExecution | None],
) -> None:
    """Undo `set_current_deferred_tool_execution`."""
    _current_execution.reset(token)

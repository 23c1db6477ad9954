"""The runner contract: how an agent framework plugs into a durable session.

A runner runs ONE model segment per call of `run_model`: the framework's agent
loop until it answers (`TurnCompleted`) or asks for tool calls that must run in
their own Step (`ToolCallsRequested`). The session then approves and runs those
calls and calls `run_model` again with `resume` set. Everything the runner needs
comes in the context; everything bulky it returns (messages) is written to the
runtime store by the engine binding, never into workflow history.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import Field

from ._events import EventSink
from ._json import JsonObject
from ._media import ImageReference
from ._pending import failure_note
from ._policy import ToolEffect, ToolPolicy
from ._records import (
    DeferredToolExecution,
    StoredMessage,
    ToolCall,
    ToolOutcome,
    ToolRecord,
)
from ._usage import ModelCallMetadata, Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCompleted:
    """The segment ended with the model's answer; the turn is over."""

    kind: Literal["turn_completed"] = "turn_completed"
    messages: tuple[StoredMessage, ...]
    """Every message of the turn after its prompts, including those of earlier segments."""
    final_text: str = ""
    usage: Usage = field(default_factory=Usage)
    metadata: ModelCallMetadata = field(default_factory=ModelCallMetadata)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallsRequested:
    """The segment stopped at tool calls that run in their own Steps, in this order."""

    kind: Literal["tool_calls_requested"] = "tool_calls_requested"
    calls: tuple[ToolCall, ...]
    run_state: JsonObject
    """Small framework state a resumed segment needs (for example a session ID)."""
    messages: tuple[StoredMessage, ...] = ()
    """The turn's messages so far; handed back in `ResumeState.messages`."""
    usage: Usage = field(default_factory=Usage)
    metadata: ModelCallMetadata = field(default_factory=ModelCallMetadata)


RunModelResult = Annotated[
    TurnCompleted | ToolCallsRequested, Field(discriminator="kind")
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeState:
    """What a resumed segment continues from: the run state and the deferred calls' records."""

    run_state: JsonObject
    messages: tuple[StoredMessage, ...]
    records: tuple[ToolRecord, ...]
    """Final records of the calls the previous segment requested, in its order."""


class TranscriptReader(Protocol):
    """Reads the committed transcript of the session (completed turns only)."""

    async def messages(self) -> list[StoredMessage]:
        """Every committed message, oldest first."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class RunModelContext:
    """Everything one RunModel attempt may use."""

    session_id: str
    flow_type: str
    turn_id: str
    step_execution_id: str
    attempt: int
    pending: tuple[JsonObject, ...]
    """Stored items that never reached a model: user prompts and turn-failure notes, oldest first."""
    transcript: TranscriptReader
    events: EventSink
    tool_policies: dict[str, ToolPolicy]
    default_tool_effect: ToolEffect
    resume: ResumeState | None = None
    max_budget_usd: float | None = None
    """What is left of the session's spend limit (USD), or None without one. A
    runner whose framework can stop at a budget passes it on and raises
    `BudgetReachedError` when it stopped there; the session then asks for a new
    limit. Others ignore it (the limit is then checked between segments)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EditContext:
    """What a runner may use to check a person's edit of a waiting call."""

    session_id: str
    flow_type: str
    turn_id: str
    tool_policies: dict[str, ToolPolicy]
    default_tool_effect: ToolEffect


class AgentFrameworkRunner(Protocol):
    """What a framework adapter implements to run as a durable session.

    A runner that can send images also has `build_user_message_with_images`
    (see `ImageMessageBuilder`); the session checks for it once, when the flow
    is created, and answers `send_user_message` with images False without it.
    """

    def build_user_message(self, text: str) -> JsonObject:
        """The stored item for a user message, such as `{"kind": "user_prompt", "text": ...}`."""
        ...

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        """Run one model segment; raise to fail the attempt (it reruns whole)."""
        ...

    async def execute_deferred_tool(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> ToolOutcome:
        """Run a deferred call in its tool Step.

        Raise `ToolExecutionError` for a failed result the model reads; any other
        error fails the Step attempt (retried for `call_tool`, then `outcome_unknown`).
        """
        ...

    def validate_session_options(self, *, compaction: object | None) -> None:
        """Raise `UserError` for session options this framework cannot honor."""
        ...

    async def check_edited_call(
        self, call: ToolCall, arguments: JsonObject, context: EditContext
    ) -> ToolCall:
        """The call `call` becomes when a person approves it with `arguments` instead.

        Check `arguments` against the tool's input schema and decide the call's
        policy again on them (an application's per-input decision included);
        return the call with them. It runs on the worker that holds the
        session, before the approval is applied: keep it quick and free of
        side effects.

        Raises:
            InvalidEditError: the tool refuses the edit (name the field); the
                call stays pending.
        """
        ...


@runtime_checkable
class ImageMessageBuilder(Protocol):
    """The optional runner capability of user messages with images.

    A runner has it when it has this method; `image_message_builder` checks.
    """

    def build_user_message_with_images(
        self, text: str, images: Sequence[ImageReference]
    ) -> JsonObject:
        """The stored item of a user message with media store references.

        It must not read the images: it runs in the workflow, so it stays
        deterministic and free of I/O. The runner reads the bytes in RunModel.
        """
        ...


def image_message_builder(
    runner: object,
) -> Callable[[str, Sequence[ImageReference]], JsonObject] | None:
    """`runner`'s `build_user_message_with_images`, or None when it cannot send images."""
    if isinstance(runner, ImageMessageBuilder):
        return runner.build_user_message_with_images
    return None


def turn_failure_note(
    turn_id: str, reason: str, records: Sequence[ToolRecord]
) -> JsonObject:
    """The stored note for a turn whose RunModel failed for good (see `failure_note`)."""
    return failure_note(turn_id, reason, records).to_item()


class ParkedResume(Protocol):
    """A resumed segment started before its decision (see `ResumeParker`)."""

    @property
    def pid(self) -> int | None:
        """The parked process's PID, for logs and `dex-agents show`."""
        ...

    def alive(self) -> bool:
        """Whether a decision can still adopt it."""
        ...

    async def ready(self) -> None:
        """Wait until it waits at the deferred call (or has ended)."""
        ...

    async def resume(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested | None:
        """Run the rest of the segment as `context`'s attempt.

        Returns None, having touched nothing, when the park is gone: the caller
        then runs the segment cold. Raises what the segment raises otherwise.
        """
        ...

    async def close(self) -> None:
        """End it without a decision; it leaves nothing the cold path would miss."""
        ...


@runtime_checkable
class ResumeParker(Protocol):
    """The optional runner capability of starting a resumed segment before its decision.

    A runner has it when it has this method (the Claude runner: unless its
    flow has tool sources); `resume_parker` checks.
    """

    def park_resume(
        self, context: RunModelContext, *, window: float
    ) -> Coroutine[Any, Any, ParkedResume]:
        """Start `context`'s resumed segment now; it waits for its decision up to `window` s."""
        ...


def resume_parker(
    runner: object,
) -> Callable[..., Coroutine[Any, Any, ParkedResume]] | None:
    """`runner`'s `park_resume(context, *, window)`, or None when it cannot park.

    A runner that can start its resumed segment before the decision (the
    Claude runner: a CLI waiting in the deferred call's hook) has it; the
    engine then keeps one such park per deferral for `hot_resume_window`.
    """
    if isinstance(runner, ResumeParker):
        return runner.park_resume
    return None

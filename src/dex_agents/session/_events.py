"""Live session events: what clients follow while a turn runs.

Events never go through workflow history. They are appended to the runtime
store's event log under `(session_id, turn_id, step_execution_id, attempt, seq)`.
A retried attempt re-sends its deltas, so readers group text by
`(turn_id, step_execution_id, attempt)` and keep the latest attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from ._json import JsonObject

AgentEventType = Literal[
    "text_delta",
    "reasoning_delta",
    "tool_call_started",
    "tool_call_finished",
    "turn_started",
    "turn_completed",
    "turn_failed",
    "interrupt_created",
    "interrupt_resolved",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentEvent:
    """One live event as a runner or the session emits it (before it is keyed)."""

    type: AgentEventType
    data: JsonObject = field(default_factory=lambda: {})


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


class EventSink(Protocol):
    """Where a runner sends its live events during one Step attempt."""

    def emit(self, event: AgentEvent) -> None:
        """Queue one event; it must not block the segment."""
        ...

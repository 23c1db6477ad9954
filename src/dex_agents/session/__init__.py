"""The engine-free session core: what a runner of another agent framework implements.

`AgentFrameworkRunner` and the types of its methods, the options and policies
of a session, and the live events a runner emits or a reader parses
(`EventRecord`, the envelope, and one payload class per event type, so that a
reader can `match` on any of them). The turn machine, its Steps and the
session's state are private to the engine binding.
"""

from ._events import (
    AgentEvent,
    EventPayload,
    EventRecord,
    InterruptCreatedEvent,
    InterruptResolvedEvent,
    ModelRetryEvent,
    ReasoningDeltaEvent,
    SegmentRerunEvent,
    SessionEndedEvent,
    TextDeltaEvent,
    ToolCallAttemptFailedEvent,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    TurnCancelledEvent,
    TurnCompletedEvent,
    TurnFailedEvent,
    TurnStartedEvent,
)
from ._options import AgentSessionOptions
from ._policy import ToolPolicy
from ._records import (
    StoredMessage,
    ToolCall,
    ToolOutcome,
    current_deferred_tool_execution,
)
from ._runner import (
    AgentFrameworkRunner,
    EditContext,
    RunModelContext,
    ToolCallsRequested,
    TurnCompleted,
)

__all__ = [
    "AgentEvent",
    "AgentFrameworkRunner",
    "AgentSessionOptions",
    "EditContext",
    "EventPayload",
    "EventRecord",
    "InterruptCreatedEvent",
    "InterruptResolvedEvent",
    "ModelRetryEvent",
    "ReasoningDeltaEvent",
    "RunModelContext",
    "SegmentRerunEvent",
    "SessionEndedEvent",
    "StoredMessage",
    "TextDeltaEvent",
    "ToolCall",
    "ToolCallAttemptFailedEvent",
    "ToolCallFinishedEvent",
    "ToolCallStartedEvent",
    "ToolCallsRequested",
    "ToolOutcome",
    "ToolPolicy",
    "TurnCancelledEvent",
    "TurnCompleted",
    "TurnCompletedEvent",
    "TurnFailedEvent",
    "TurnStartedEvent",
    "current_deferred_tool_execution",
]

"""The engine-free session core: what a runner of another agent framework implements.

`AgentFrameworkRunner` and the types of its methods, the options and policies
of a session, and the live events a runner emits or a reader parses. The turn
machine, its Steps and the session's state are private to the engine binding.
"""

from ._events import AgentEvent, TextDeltaEvent, ToolCallFinishedEvent
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
    "RunModelContext",
    "StoredMessage",
    "TextDeltaEvent",
    "ToolCall",
    "ToolCallFinishedEvent",
    "ToolCallsRequested",
    "ToolOutcome",
    "ToolPolicy",
    "TurnCompleted",
    "current_deferred_tool_execution",
]

"""The engine-free session core: records, policies, events, usage and the runner contract."""

from ._events import AgentEvent, AgentEventType, EventRecord, EventSink
from ._json import JsonObject, JsonValue
from ._options import AgentSessionOptions
from ._policy import (
    TOOL_EFFECTS,
    ToolEffect,
    ToolPolicy,
    ToolStep,
    idempotency_key,
    resolve_policy,
)
from ._records import (
    DeferredToolExecution,
    MessageRole,
    StoredMessage,
    ToolCall,
    ToolOutcome,
    ToolRecord,
    ToolRecordStatus,
    current_deferred_tool_execution,
    reset_current_deferred_tool_execution,
    set_current_deferred_tool_execution,
)
from ._runner import (
    AgentFrameworkRunner,
    ResumeState,
    RunModelContext,
    RunModelResult,
    ToolCallsRequested,
    TranscriptReader,
    TurnCompleted,
    turn_failure_note,
)
from ._usage import ModelCallMetadata, Usage

__all__ = [
    "AgentEvent",
    "AgentEventType",
    "AgentFrameworkRunner",
    "AgentSessionOptions",
    "DeferredToolExecution",
    "EventRecord",
    "EventSink",
    "JsonObject",
    "JsonValue",
    "MessageRole",
    "ModelCallMetadata",
    "ResumeState",
    "RunModelContext",
    "RunModelResult",
    "StoredMessage",
    "TOOL_EFFECTS",
    "ToolCall",
    "ToolCallsRequested",
    "ToolEffect",
    "ToolOutcome",
    "ToolPolicy",
    "ToolRecord",
    "ToolRecordStatus",
    "ToolStep",
    "TranscriptReader",
    "TurnCompleted",
    "Usage",
    "current_deferred_tool_execution",
    "idempotency_key",
    "reset_current_deferred_tool_execution",
    "resolve_policy",
    "set_current_deferred_tool_execution",
    "turn_failure_note",
]

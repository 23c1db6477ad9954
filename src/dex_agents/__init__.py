"""Durable agent sessions for the Claude Agent SDK, on Temporal.

The everyday names live here. Engine-bound ones (the client RPCs, worker and
engine) load on first use, so `import dex_agents.session` stays free of Temporal.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._errors import (
    BudgetReachedError,
    DexAgentsError,
    EngineError,
    IdleTimeoutError,
    InvalidArgumentError,
    InvalidEditError,
    InvalidOptionError,
    MessageTooLargeError,
    NoWorkerError,
    SessionBusyError,
    SessionEndedError,
    SessionError,
    SpendLimitExceeded,
    ToolExecutionError,
    UnknownInterruptError,
    UnknownSessionError,
    UserError,
)
from .session import (
    AgentFrameworkRunner,
    AgentSessionOptions,
    DeferredToolExecution,
    ToolEffect,
    ToolPolicy,
    current_deferred_tool_execution,
)

if TYPE_CHECKING:
    from .stores import RuntimeStore, SQLiteRuntimeStore
    from .temporal import (
        AgentSessionFlow,
        AgentSnapshot,
        EmbeddedEngine,
        EngineConfig,
        SessionClient,
        create_agent_session_flow,
        create_worker,
        get_agent_snapshot,
        open_engine,
        resolve_interrupt,
        send_user_message,
        start_agent_session,
        wait_for_idle,
    )

_LAZY = {
    "RuntimeStore": "stores",
    "SQLiteRuntimeStore": "stores",
    "AgentSessionFlow": "temporal",
    "AgentSnapshot": "temporal",
    "EmbeddedEngine": "temporal",
    "EngineConfig": "temporal",
    "SessionClient": "temporal",
    "create_agent_session_flow": "temporal",
    "create_worker": "temporal",
    "get_agent_snapshot": "temporal",
    "open_engine": "temporal",
    "resolve_interrupt": "temporal",
    "send_user_message": "temporal",
    "start_agent_session": "temporal",
    "wait_for_idle": "temporal",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'dex_agents' has no attribute {name!r}")


__all__ = [
    "AgentFrameworkRunner",
    "AgentSessionFlow",
    "AgentSessionOptions",
    "AgentSnapshot",
    "BudgetReachedError",
    "DeferredToolExecution",
    "DexAgentsError",
    "EmbeddedEngine",
    "EngineConfig",
    "EngineError",
    "IdleTimeoutError",
    "InvalidArgumentError",
    "InvalidEditError",
    "InvalidOptionError",
    "MessageTooLargeError",
    "NoWorkerError",
    "RuntimeStore",
    "SQLiteRuntimeStore",
    "SessionBusyError",
    "SessionClient",
    "SessionEndedError",
    "SessionError",
    "SpendLimitExceeded",
    "ToolEffect",
    "ToolExecutionError",
    "ToolPolicy",
    "UnknownInterruptError",
    "UnknownSessionError",
    "UserError",
    "create_agent_session_flow",
    "create_worker",
    "current_deferred_tool_execution",
    "get_agent_snapshot",
    "open_engine",
    "resolve_interrupt",
    "send_user_message",
    "start_agent_session",
    "wait_for_idle",
]

"""Durable agent sessions for the Claude Agent SDK, on Temporal.

The everyday names live here. Engine-bound ones (the session client, worker
and engine) load on first use, so `import dex_agents` stays free of Temporal.
"""

import importlib
import typing

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
    StoreUnavailableError,
    ToolExecutionError,
    UnknownInterruptError,
    UnknownSessionError,
    UserError,
)
from .session import (
    AgentFrameworkRunner,
    AgentSessionOptions,
    ToolPolicy,
    current_deferred_tool_execution,
)

if typing.TYPE_CHECKING:
    from .stores import RuntimeStore, SQLiteRuntimeStore
    from .temporal import (
        EmbeddedEngine,
        EngineConfig,
        SessionClient,
        SessionPlugin,
        create_agent_session_flow,
        create_worker,
        open_engine,
    )

_LAZY = {
    "RuntimeStore": "stores",
    "SQLiteRuntimeStore": "stores",
    "EmbeddedEngine": "temporal",
    "EngineConfig": "temporal",
    "SessionClient": "temporal",
    "SessionPlugin": "temporal",
    "create_agent_session_flow": "temporal",
    "create_worker": "temporal",
    "open_engine": "temporal",
}


def __getattr__(name: str) -> typing.Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'dex_agents' has no attribute {name!r}")


__all__ = [
    "AgentFrameworkRunner",
    "AgentSessionOptions",
    "BudgetReachedError",
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
    "SessionPlugin",
    "StoreUnavailableError",
    "ToolExecutionError",
    "ToolPolicy",
    "UnknownInterruptError",
    "UnknownSessionError",
    "UserError",
    "create_agent_session_flow",
    "create_worker",
    "current_deferred_tool_execution",
    "open_engine",
]

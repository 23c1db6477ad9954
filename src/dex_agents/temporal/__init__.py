"""The Temporal binding: the session workflow, its Steps, client RPCs, worker and engine."""

from ._client import (
    SessionClient,
    cancel_turn,
    end_session,
    get_agent_snapshot,
    resolve_interrupt,
    send_and_wait,
    send_user_message,
    session_history,
    start_agent_session,
    wait_for_idle,
    with_recent_turns,
)
from ._converter import data_converter
from ._engine import (
    EmbeddedEngine,
    Engine,
    EngineConfig,
    ExternalEngine,
    connect,
    find_temporal_binary,
    open_engine,
    resolve_state_dir,
)
from ._flow import AgentSessionFlow, create_agent_session_flow
from ._models import Interrupt, TurnSummary
from ._plugin import SessionPlugin, session_plugin
from ._snapshot import AgentSnapshot
from ._worker import create_worker
from ._workflow import AgentSessionWorkflow

__all__ = [
    "AgentSessionFlow",
    "AgentSessionWorkflow",
    "AgentSnapshot",
    "EmbeddedEngine",
    "Engine",
    "EngineConfig",
    "ExternalEngine",
    "Interrupt",
    "SessionClient",
    "SessionPlugin",
    "TurnSummary",
    "cancel_turn",
    "connect",
    "create_agent_session_flow",
    "create_worker",
    "data_converter",
    "end_session",
    "find_temporal_binary",
    "get_agent_snapshot",
    "open_engine",
    "resolve_interrupt",
    "resolve_state_dir",
    "send_and_wait",
    "send_user_message",
    "session_history",
    "session_plugin",
    "start_agent_session",
    "wait_for_idle",
    "with_recent_turns",
]

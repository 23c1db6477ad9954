"""The Temporal binding: the session client, the flow, the worker and the engine."""

from ._client import SessionClient
from ._engine import EmbeddedEngine, EngineConfig, open_engine
from ._flow import create_agent_session_flow
from ._plugin import SessionPlugin
from ._worker import create_worker

__all__ = [
    "EmbeddedEngine",
    "EngineConfig",
    "SessionClient",
    "SessionPlugin",
    "create_agent_session_flow",
    "create_worker",
    "open_engine",
]

"""The scripted Messages API: the real Claude Code CLI, offline, with no API key.

Not a test module: `dex-agents dev --scripted-model` and `dex-agents demo`
serve it, and `dex_agents.testing` re-exports what tests use. It imports
nothing else of dex-agents, so every layer above may use it.
"""

from ._mock_messages_api import MockMessagesApi, RecordedRequest
from ._scripted_model import (
    SCRIPTED_MODEL_API_KEY,
    UNSCRIPTED_REPLY,
    ScriptedModel,
    scripted_model,
    scripted_model_env,
)

__all__ = [
    "MockMessagesApi",
    "RecordedRequest",
    "SCRIPTED_MODEL_API_KEY",
    "ScriptedModel",
    "UNSCRIPTED_REPLY",
    "scripted_model",
    "scripted_model_env",
]

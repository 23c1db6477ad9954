"""The Claude Agent SDK adapter: run a Claude agent as a durable session."""

try:
    # Imported only to fail here, with the fix, when the extra is missing.
    import claude_agent_sdk as _claude_agent_sdk  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        '`dex_agents.claude` needs the `claude` extra: pip install "dex-agents[claude]"'
    ) from e

from ._definition import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    ClaudeAgentOptionsFactory,
    ClaudeCodeToolDenial,
    ClaudeCodeToolPermission,
)
from ._runner import ClaudeAgentRunner
from ._session_flow import create_claude_agent_session_flow

__all__ = [
    "ClaudeAgentDefinition",
    "ClaudeAgentOptionsContext",
    "ClaudeAgentOptionsFactory",
    "ClaudeAgentRunner",
    "ClaudeCodeToolDenial",
    "ClaudeCodeToolPermission",
    "create_claude_agent_session_flow",
]

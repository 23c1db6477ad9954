"""The Claude Agent SDK adapter: run a Claude agent as a durable session."""

try:
    import claude_agent_sdk as _claude_agent_sdk  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        '`dex_agents.claude` needs the `claude` extra: pip install "dex-agents[claude]"'
    ) from e

from ..session import current_deferred_tool_execution
from ._definition import (
    DEFAULT_CUSTOM_TOOL_SERVER_NAME,
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    ClaudeAgentOptionsFactory,
    ClaudeCodeToolDenial,
    ClaudeCodeToolPermission,
)
from ._runner import APPROVED_CLI_TOOL_OUTPUT, ClaudeAgentRunner
from ._session_flow import create_claude_agent_session_flow
from ._transcript import CLAUDE_TRANSCRIPT_ITEM_KIND, USER_PROMPT_ITEM_KIND

__all__ = [
    "APPROVED_CLI_TOOL_OUTPUT",
    "CLAUDE_TRANSCRIPT_ITEM_KIND",
    "ClaudeAgentDefinition",
    "ClaudeAgentOptionsContext",
    "ClaudeAgentOptionsFactory",
    "ClaudeAgentRunner",
    "ClaudeCodeToolDenial",
    "ClaudeCodeToolPermission",
    "DEFAULT_CUSTOM_TOOL_SERVER_NAME",
    "USER_PROMPT_ITEM_KIND",
    "create_claude_agent_session_flow",
    "current_deferred_tool_execution",
]

"""`create_claude_agent_session_flow`: the adapter's one-call entry to a durable session."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .._errors import UserError
from ..session import AgentSessionOptions
from ._definition import ClaudeAgentDefinition
from ._runner import ClaudeAgentRunner

if TYPE_CHECKING:
    from ..temporal._flow import AgentSessionFlow


def create_claude_agent_session_flow(
    agent: ClaudeAgentDefinition,
    flow_type: str,
    session_options: AgentSessionOptions | None = None,
    *,
    task_queue: str | None = None,
) -> AgentSessionFlow:
    """Build the session flow of a Claude agent under the workflow type `flow_type`.

    The agent's `tool_policies` become the session's; `session_options` carries
    everything else (deadlines, limits, spend) and must not set policies itself,
    so there is one place that classifies tools.

    Raises:
        UserError: `session_options.tool_policies` is set, or the options ask for
            something the Claude runner cannot do (compaction).
    """
    # Imported here so `import dex_agents.claude` stays free of the engine.
    from ..temporal import create_agent_session_flow

    options = AgentSessionOptions() if session_options is None else session_options
    if not isinstance(options, AgentSessionOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(
            f"`session_options` must be an `AgentSessionOptions` or None, got "
            f"{type(options).__name__} {options!r:.80}; build one, e.g. "
            "AgentSessionOptions(spend_limit=5.0)"
        )
    if options.tool_policies:
        raise UserError(
            "set `tool_policies` on the `ClaudeAgentDefinition`, not in the session "
            f"options (got {sorted(options.tool_policies)!r})"
        )
    options = replace(options, tool_policies=dict(agent.tool_policies))
    return create_agent_session_flow(
        ClaudeAgentRunner(agent), flow_type, options, task_queue=task_queue
    )

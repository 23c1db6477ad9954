"""What an application declares: options, custom tools, policies, a per-call rule."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeAlias

from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool

from .._errors import InvalidOptionError
from ..session import RunModelContext, ToolPolicy
from ..session._tool_sources import ToolSource, check_tool_source_names
from ..stores import MediaStore
from ._tools import CLAUDE_CODE_TOOL_NAMES, check_custom_tools

DEFAULT_CUSTOM_TOOL_SERVER_NAME = "tools"
"""Name of the in-process MCP server that serves the custom tools."""

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaudeAgentOptionsContext:
    """Which RunModel attempt an options factory builds options for."""

    flow_id: str
    """The session (Flow) ID; keep the options deterministic for it."""
    turn_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ClaudeCodeToolDenial:
    """A per-call answer that denies a Claude Code tool call.

    The model reads `PreToolUse:<tool> hook error: <reason>`.
    """

    reason: str


ClaudeAgentOptionsFactory: TypeAlias = Callable[
    [ClaudeAgentOptionsContext], ClaudeAgentOptions
]
"""Builds the SDK options of one RunModel attempt."""

ClaudeCodeToolDecision: TypeAlias = ToolPolicy | ClaudeCodeToolDenial | None

ClaudeCodeToolPermission: TypeAlias = Callable[
    [RunModelContext, str, dict[str, Any]],
    ClaudeCodeToolDecision | Awaitable[ClaudeCodeToolDecision],
]
"""Decides one new call of a tool that runs inside the CLI, from its input.

Called with the RunModel context, the tool's CLI name (`Bash`,
`mcp__github__create_issue`) and the call's input after the application's
PreToolUse hooks. A `ToolPolicy` is the call's policy, a `ClaudeCodeToolDenial`
denies it, and None keeps the session's policies. A raised error denies the call
with its message.
"""


@dataclass(frozen=True, kw_only=True)
class ClaudeAgentDefinition:
    """A Claude Agent SDK agent that runs as a durable session.

    Raises:
        TypeError: A custom tool's name collides with a Claude Code tool, starts
            with `mcp__`, or repeats another custom tool, the server name is
            not a plain identifier, two tool sources share a name, or a source
            declares a tool name that is a custom, Claude Code or other source's
            tool.
    """

    options: ClaudeAgentOptions | ClaudeAgentOptionsFactory
    """SDK options, or a factory called for every RunModel attempt.

    Keep a factory deterministic for a Flow ID: a resumed segment must see the
    same working directory, tools and model as the attempt that deferred a call.
    """
    custom_tools: Sequence[SdkMcpTool[Any]] = ()
    """Tools made with `claude_agent_sdk.tool`, served in-process by the adapter."""
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=lambda: {})
    """Policies by bare custom tool name, built-in name, or `mcp__<server>__<tool>`."""
    custom_tool_server_name: str = DEFAULT_CUSTOM_TOOL_SERVER_NAME
    """The model sees custom tools as `mcp__<custom_tool_server_name>__<name>`."""
    claude_code_tool_permission: ClaudeCodeToolPermission | None = None
    """Per-call decision for tools that run inside the CLI; see the type."""
    tool_sources: Sequence[ToolSource] = ()
    """Providers whose tools are listed in each RunModel attempt and served after
    the custom tools; every call of one defers to its tool Step."""
    tool_source_listing_timeout: timedelta = timedelta(seconds=10)
    """How long a source's listing may take; a slower or failing source offers
    no tools in that attempt."""
    media_store: MediaStore | None = None
    """The store clients upload images to; with it the session accepts images.

    Without it `send_user_message` with images returns False. Stored transcript
    entries keep references into this store instead of image bytes, so every
    Worker of the session needs the same store.
    """

    def __post_init__(self) -> None:
        if not _SERVER_NAME.match(self.custom_tool_server_name):
            raise InvalidOptionError(
                f"`custom_tool_server_name` {self.custom_tool_server_name!r} must be "
                "letters, digits, `_` or `-`, because it becomes part of tool names"
            )
        check_custom_tools(self.custom_tools)
        check_tool_source_names(
            self.tool_sources,
            reserved=[
                *CLAUDE_CODE_TOOL_NAMES,
                *(tool.name for tool in self.custom_tools),
            ],
        )

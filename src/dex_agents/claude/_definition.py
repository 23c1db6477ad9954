"""What an application declares: options, custom tools, policies, a per-call rule."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeAlias, cast

from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool

from .._errors import InvalidOptionError, shown
from ..session import RunModelContext, ToolPolicy
from ..session._options import check_tool_policies
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
        InvalidOptionError: (a `TypeError`) A field has the wrong type or value
            (`options` is neither options nor a factory, `custom_tools` not a
            list of tools, a `tool_policies` value not a `ToolPolicy`, ...); a
            custom tool's name collides with a Claude Code tool, starts with
            `mcp__`, or repeats another custom tool; a custom tool's input
            schema is not a valid JSON Schema of an object; the server name is
            not a plain identifier; two tool sources share a name; or a source
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
        _check_fields(self)
        check_custom_tools(self.custom_tools)
        check_tool_source_names(
            self.tool_sources,
            reserved=[
                *CLAUDE_CODE_TOOL_NAMES,
                *(tool.name for tool in self.custom_tools),
            ],
        )


def _check_fields(agent: ClaudeAgentDefinition) -> None:
    """Refuse a field of `agent` of a type or value it cannot work with.

    Raises:
        InvalidOptionError: The field named in the message; it says the fix.
    """
    # `object`: the values as passed, which is what is checked.
    options = cast(object, agent.options)
    if not isinstance(options, ClaudeAgentOptions) and not callable(options):
        raise InvalidOptionError(
            "`options` must be ClaudeAgentOptions, or a factory that takes a "
            f"ClaudeAgentOptionsContext and returns them, got {shown(options)}; "
            "use options=ClaudeAgentOptions(...)"
        )
    tools = cast(object, agent.custom_tools)
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes):
        raise InvalidOptionError(
            "`custom_tools` must be a list of tools made with `claude_agent_sdk.tool`, "
            f"got {shown(tools)}; use custom_tools=[lookup_order], or leave it out "
            "for none"
        )
    check_tool_policies(
        cast(object, agent.tool_policies),
        fix='use tool_policies={"lookup_order": ToolPolicy(effect="read")}',
        entry_fix='use ToolPolicy(effect="read") (or another effect), not a bare '
        "effect name",
        error=InvalidOptionError,
    )
    server = cast(object, agent.custom_tool_server_name)
    if not isinstance(server, str) or not _SERVER_NAME.match(server):
        raise InvalidOptionError(
            f"`custom_tool_server_name` {shown(server)} must be a str of letters, "
            "digits, `_` or `-`, because it becomes part of tool names; use "
            f"custom_tool_server_name={DEFAULT_CUSTOM_TOOL_SERVER_NAME!r}, or leave "
            "it out"
        )
    permission = cast(object, agent.claude_code_tool_permission)
    if permission is not None and not callable(permission):
        raise InvalidOptionError(
            "`claude_code_tool_permission` must be a function of (context, tool "
            f"name, input) or None, got {shown(permission)}; see "
            "ClaudeCodeToolPermission"
        )
    sources = cast(object, agent.tool_sources)
    if not isinstance(sources, Sequence) or isinstance(sources, str | bytes):
        raise InvalidOptionError(
            f"`tool_sources` must be a list of ToolSource, got {shown(sources)}; use "
            "tool_sources=[source], or leave it out for none"
        )
    for index, source in enumerate(cast("Sequence[object]", sources)):
        if not isinstance(source, ToolSource):
            raise InvalidOptionError(
                f"`tool_sources[{index}]` must be a ToolSource (such as "
                f"`dex_agents.connectors.McpToolSource`), got {shown(source)}"
            )
    timeout = cast(object, agent.tool_source_listing_timeout)
    if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
        raise InvalidOptionError(
            "`tool_source_listing_timeout` must be a positive datetime.timedelta, "
            f"got {shown(timeout)}; use timedelta(seconds=10)"
        )

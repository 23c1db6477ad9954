"""What an application declares: options, custom tools, policies, a per-call rule."""

from __future__ import annotations

import difflib
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeAlias, cast

from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool

from .._errors import InvalidOptionError, shown
from ..session import RunModelContext, ToolPolicy
from ..session._options import check_tool_policies
from ..session._tool_sources import ToolSource, check_tool_source_names
from ..stores import MediaStore
from ._options import check_options, deferring_tools
from ._tools import CLAUDE_CODE_TOOL_NAMES, CustomTool, check_custom_tools

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
            `mcp__`, or repeats another custom tool; a custom tool's handler is
            not async; a custom tool's input schema is not a valid JSON Schema
            of an object; the server name is not a plain identifier; two tool
            sources share a name; a source declares a tool name that is a
            custom, Claude Code or other source's tool; a `tool_policies` key
            names a served tool by its `mcp__` name, or is a near miss of a
            tool's name; or options given as they are would fail every turn
            (see `options`).
    """

    options: ClaudeAgentOptions | ClaudeAgentOptionsFactory
    """SDK options, or a factory called for every RunModel attempt.

    Keep a factory deterministic for a Flow ID: a resumed segment must see the
    same working directory, tools and model as the attempt that deferred a call.
    Options given as they are (not a factory) are checked when the agent is
    defined, as every attempt checks them: an option the adapter owns, a
    permission mode other than unset, `default` or `dontAsk`, an in-process
    SDK server in `mcp_servers`, or an `allowed_tools` entry for a tool whose
    calls must defer is refused there, not at the first turn. A factory's
    options are checked in each attempt.
    """
    custom_tools: Sequence[SdkMcpTool[Any]] = ()
    """Tools made with `claude_agent_sdk.tool`, served in-process by the adapter."""
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=lambda: {})
    """Policies by tool name, as records and approvals name the tools.

    - a custom tool (or a tool source's) by its bare name: `lookup_order`,
      never `mcp__<custom_tool_server_name>__lookup_order`, which is refused
      with the bare name to use instead, so one tool has one name everywhere;
    - a Claude Code tool by its name: `Bash`, `Read`;
    - a tool of another MCP server (one in the options' `mcp_servers`, a
      plugin's, ...) by the name the CLI gives it: `mcp__<server>__<tool>`.

    A key that names no tool would be ignored, and its tool would wait for
    approval as unclassified (or, for a write, run in a single attempt Step),
    so a near miss is refused when the agent is defined: a name that differs
    from a custom, source or Claude Code tool only in case (`bash`), and a
    bare name close to a custom or declared source tool's (`lookup_ordr`).
    Other bare names are accepted: a newer CLI's tool, or a tool that a
    dynamic source lists later.
    """
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
        _check_policy_names(self)
        if isinstance(self.options, ClaudeAgentOptions):
            _check_static_options(self, self.options)


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
    media = cast(object, agent.media_store)
    if media is not None and not all(
        callable(getattr(media, method, None)) for method in ("put_image", "get_image")
    ):
        # A location (`"s3://bucket"`) was accepted, then failed at the first image.
        raise InvalidOptionError(
            "`media_store` must be a MediaStore (with `put_image` and `get_image`) "
            f"or None, got {shown(media)}; use media_store=DirectoryMediaStore(path) "
            "(dex_agents.stores), S3MediaStore(...) (dex_agents.s3), or leave it out "
            "for no images"
        )


def _check_policy_names(agent: ClaudeAgentDefinition) -> None:
    """Refuse a `tool_policies` key that can never name the tool it meant.

    A policy is looked up by exact name, so a key that names no tool is
    ignored without a word and its tool runs as the session's default
    (unclassified: every call waits for approval). See
    `ClaudeAgentDefinition.tool_policies` for which keys are refused.

    Raises:
        InvalidOptionError: The key, and the name to use instead.
    """
    custom = [tool.name for tool in agent.custom_tools]
    declared = [
        name for source in agent.tool_sources for name in source.declared_tool_names
    ]
    served = [*custom, *declared]
    known = {*served, *CLAUDE_CODE_TOOL_NAMES}
    server = agent.custom_tool_server_name
    prefix = f"mcp__{server}__".casefold()
    for key in agent.tool_policies:
        if key in known:
            continue
        folded = key.casefold()
        if folded == prefix.removesuffix("__") or folded.startswith(prefix):
            bare = key[len(prefix) :]
            meant = bare if bare in served else _near_miss(bare, served)
            if meant is not None:
                fix = f"use {meant!r}"
            elif bare:
                fix = (
                    f"use {bare!r} if a tool source lists it (no custom or declared "
                    f"source tool has that name; custom tools: {_listed(custom)})"
                )
            else:
                fix = f"give each tool its own key (custom tools: {_listed(custom)})"
            raise InvalidOptionError(
                f"`tool_policies` key {key!r} names the custom tool server "
                f"{server!r} by its MCP name, but policies (like records and "
                f"approvals) name each of its tools bare; {fix}"
            )
        if key.startswith("mcp__"):
            continue  # another MCP server's tool, unknown until the CLI runs
        meant = _near_miss(key, served, CLAUDE_CODE_TOOL_NAMES)
        if meant is not None:
            source_hint = (
                "; a tool source's tool is accepted once the source declares it "
                "(`declared_tool_names`)"
                if agent.tool_sources
                else ""
            )
            raise InvalidOptionError(
                f"`tool_policies` key {key!r} names no tool of this agent, so its "
                f"policy would never apply; did you mean {meant!r}? (keys are "
                f"exact, case included){source_hint}"
            )


def _near_miss(
    name: str, served: Sequence[str], others: Collection[str] = ()
) -> str | None:
    """The tool `name` probably meant: one that differs only in case, or close.

    Case is compared with `served` (custom and declared source tools) and
    `others` (Claude Code tools); closeness (difflib's ratio of at least 0.8,
    `lookup_ordr` for `lookup_order`) only with `served`, since a bare name
    close to a Claude Code tool's may be a newer CLI's tool.
    """
    folded = name.casefold()
    for known in (*served, *sorted(others)):
        if known.casefold() == folded:
            return known
    close = difflib.get_close_matches(name, served, n=1, cutoff=0.8)
    return close[0] if close else None


def _listed(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names) if names else "there are none"


def _check_static_options(
    agent: ClaudeAgentDefinition, options: ClaudeAgentOptions
) -> None:
    """Check options given as they are now, as every RunModel attempt would.

    The session's default effect is not known yet, so an `allowed_tools`
    entry is refused here only when its tool defers whatever it is (by a
    policy, annotations, or being a source's tool); each attempt still checks
    the rest.

    Raises:
        InvalidOptionError: As `check_options` does.
    """
    check_options(
        options,
        server_name=agent.custom_tool_server_name,
        must_defer=deferring_tools(
            server_name=agent.custom_tool_server_name,
            tools={tool.name: CustomTool.from_sdk(tool) for tool in agent.custom_tools},
            source_tools=[
                name
                for source in agent.tool_sources
                for name in source.declared_tool_names
            ],
            policies=agent.tool_policies,
            default_effect=None,
        ),
    )

"""Which SDK options the application may set, and the CLI environment of a segment.

The adapter owns every option that decides how a segment starts, resumes, or
gets permission: a setting that let a tool run without its approval or its Step
fails the turn attempt with an `InvalidOptionError` (a `UserError` and a
`TypeError`) naming the option. Options given as they are, not by a factory,
cannot change between attempts, so the agent's definition runs the same check
and refuses them before any turn.

In-process SDK servers (`create_sdk_mcp_server`) in `mcp_servers` are refused
rather than classified: their tools are closures inside an `mcp.server.Server`
that the SDK does not hand back, so the adapter could not see their
annotations or run their writes in a Step; the same tools in `custom_tools` get
both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import cast

from claude_agent_sdk import ClaudeAgentOptions

from .._errors import InvalidOptionError
from ..session import ToolPolicy
from ..session._policy import ToolEffect
from ._tools import CustomTool

_OWNED_FIELDS: tuple[tuple[str, str], ...] = (
    ("can_use_tool", "the adapter answers permission requests"),
    ("continue_conversation", "the adapter chooses the session to resume"),
    ("enable_file_checkpointing", "a rewind would undo recorded tool effects"),
    ("fork_session", "a fork would lose the recorded session"),
    ("permission_prompt_tool_name", "the adapter answers permission requests"),
    ("resume", "the adapter resumes the stored session"),
    ("resume_session_at", "the adapter resumes the stored session"),
    ("resume_drops_turn", "the adapter resumes the stored session"),
    ("session_id", "the adapter names the session"),
    ("session_store", "the adapter keeps the transcript"),
)
_OWNED_EXTRA_ARGS = frozenset(
    {
        "mcp-config",
        "resume",
        "session-id",
        "await-initialize",
        "permission-mode",
        "dangerously-skip-permissions",
        "allow-dangerously-skip-permissions",
    }
)
ALLOWED_PERMISSION_MODES: tuple[str | None, ...] = (None, "default", "dontAsk")
"""The permission modes a segment runs with: unset, `default` or `dontAsk`.

In these the CLI asks the adapter about each tool call it does not deny
itself, so the session's policies decide it. Every other mode skips or changes
that question: `bypassPermissions`, `acceptEdits` and `auto` let calls run
unasked, and `plan` stops tools from running at all.
"""

TOOL_TIMEOUT_VARIABLE = "MCP_TOOL_TIMEOUT"
"""Bounds Claude Code's calls of MCP tools (milliseconds); unset, the adapter's are not."""

SECURE_STORAGE_VARIABLE = "CLAUDE_SECURESTORAGE_CONFIG_DIR"
"""Where Claude Code finds a stored login (such as one in the macOS Keychain)."""


def check_options(
    options: ClaudeAgentOptions,
    *,
    server_name: str,
    must_defer: Callable[[str], bool],
) -> None:
    """Refuse options that would let a tool run without its approval or Step.

    Args:
        options: What the application's options (or factory) gave.
        server_name: The custom tool server's name, which `mcp_servers` may not use.
        must_defer: Whether calls of a tool, named as in `allowed_tools`, must
            defer (wait for approval or run in their own Step).

    Raises:
        InvalidOptionError: An option the adapter owns is set, the permission
            mode is not one of `ALLOWED_PERMISSION_MODES`, the server name is
            taken, `mcp_servers` holds an in-process SDK server (its tools
            belong in `custom_tools`), or `allowed_tools` allows a tool whose
            calls must defer.
    """
    defaults = ClaudeAgentOptions()
    for name, why in _OWNED_FIELDS:
        if getattr(options, name) != getattr(defaults, name):
            raise InvalidOptionError(
                f"`{name}` is set in the Claude agent options, but the adapter owns "
                f"it ({why}); remove it"
            )
    for flag in options.extra_args:
        if flag in _OWNED_EXTRA_ARGS:
            raise InvalidOptionError(
                f"`extra_args[{flag!r}]` is set in the Claude agent options, but the "
                "adapter owns that CLI flag; remove it"
                + (" and set `permission_mode`" if flag == "permission-mode" else "")
            )
    mode = options.permission_mode
    if mode not in ALLOWED_PERMISSION_MODES:
        raise InvalidOptionError(
            f"`permission_mode` {mode!r} is not allowed: the session's approval "
            "gate decides each tool call only in 'default' or 'dontAsk' mode (other "
            "modes run calls unasked or change what runs); use one of those, or "
            "leave it unset (None)"
        )
    servers = options.mcp_servers
    if not isinstance(servers, Mapping):
        raise InvalidOptionError(
            "`mcp_servers` is a path or JSON string, so the adapter cannot add its "
            f"custom tool server {server_name!r}; pass a dict of server configs"
        )
    for name, config in cast("Mapping[object, object]", servers).items():
        if (
            isinstance(config, Mapping)
            and cast("Mapping[str, object]", config).get("type") == "sdk"
        ):
            raise InvalidOptionError(
                f"`mcp_servers[{name!r}]` is an in-process SDK server "
                "(`create_sdk_mcp_server`): the CLI would call its tools itself, "
                "ignoring their annotations, and run a write inside the CLI, at "
                "least once, with no Step or idempotency key; pass its tools as "
                "`custom_tools=[...]` instead (each is then classified by its "
                "policy or annotations, and a write runs in its own Step with an "
                f"idempotency key; `custom_tool_server_name={name!r}` keeps the "
                "names the model sees)"
            )
    if server_name in servers:
        raise InvalidOptionError(
            f"`mcp_servers` uses the name {server_name!r}, which the custom tool "
            "server needs; rename that server or set `custom_tool_server_name`"
        )
    for entry in options.allowed_tools:
        tool = allowed_tool_name(entry)
        if tool is not None and must_defer(tool):
            raise InvalidOptionError(
                f"`allowed_tools` lists {entry!r}, but its calls must wait for "
                "approval or run in their own step; remove it (the session's "
                "policies decide these calls)"
            )


def deferring_tools(
    *,
    server_name: str,
    tools: Mapping[str, CustomTool],
    source_tools: Collection[str] = (),
    policies: Mapping[str, ToolPolicy],
    default_effect: ToolEffect | None,
) -> Callable[[str], bool]:
    """The `must_defer` of `check_options`: whether calls of a tool must defer.

    A name is an `allowed_tools` name: `mcp__<server_name>__<tool>` (or the
    whole server, `mcp__<server_name>` and `mcp__<server_name>__*`) for the
    served `tools` (and `source_tools`, tools that sources declare but did
    not list yet), anything else a tool inside the CLI. A source's tool
    always defers; a custom tool by its policy, else its annotations, else
    the default effect; a CLI tool by its policy, else the default effect.

    `default_effect` None means the session's default is not known yet (the
    definition is checked before any session exists): a tool whose answer
    depends on it is then not reported, and the check of each turn decides it.
    """
    prefix = f"mcp__{server_name}__"

    def policy_of(tool: CustomTool) -> ToolPolicy | None:
        policy = policies.get(tool.name)
        if policy is not None:
            return policy
        effect = tool.annotation_effect or default_effect
        return None if effect is None else ToolPolicy(effect=effect)

    def defers(tool: CustomTool) -> bool:
        if tool.source is not None:
            return True  # Every source call runs in its tool Step.
        policy = policy_of(tool)
        return policy is not None and (policy.effect != "read" or policy.needs_approval)

    def must_defer(name: str) -> bool:
        if name in (f"mcp__{server_name}", f"{prefix}*"):
            return bool(source_tools) or any(defers(t) for t in tools.values())
        if name.startswith(prefix):
            bare = name.removeprefix(prefix)
            tool = tools.get(bare)
            if tool is None:
                return bare in source_tools
            return defers(tool)
        policy = policies.get(name)
        if policy is None and default_effect is not None:
            policy = ToolPolicy(effect=default_effect)
        return policy is not None and policy.needs_approval

    return must_defer


def allowed_tool_name(entry: str) -> str | None:
    """The tool an `allowed_tools` entry is about: `Bash(ls:*)` is about `Bash`."""
    entry = entry.strip()
    if not entry:
        return None
    open_index = entry.find("(")
    return entry if open_index == -1 else entry[:open_index] or None


def cli_environment(options: ClaudeAgentOptions) -> dict[str, str]:
    """The CLI environment: the options' env, or a copy of `os.environ`.

    Every segment after the first resumes from a temporary `CLAUDE_CONFIG_DIR`
    that the SDK prepares, where Claude Code would not find a login it stored
    (such as one in the macOS Keychain). It finds that login by
    `CLAUDE_SECURESTORAGE_CONFIG_DIR`, so this sets it to the effective
    `CLAUDE_CONFIG_DIR`, or to "" when none is set, unless the application set
    it already.
    """
    env = dict(options.env) if options.env else dict(os.environ)
    # The Python SDK merges `env` over `os.environ`, so that is what the CLI sees.
    effective = {**os.environ, **env}
    if SECURE_STORAGE_VARIABLE not in effective:
        env[SECURE_STORAGE_VARIABLE] = effective.get("CLAUDE_CONFIG_DIR", "")
    return env


def resolved_cwd(options: ClaudeAgentOptions) -> str:
    """The working directory the CLI will run in, as an absolute path."""
    return str(Path(options.cwd).resolve()) if options.cwd else str(Path.cwd())

"""The fake Claude CLI's command line: the flags the Python SDK passes, parsed.

The SDK builds argv in `SubprocessCLITransport._build_command` (claude-agent-sdk
0.2.184). Flags with a value come as `--flag value` or `--flag=value` (resume,
session ID and setting sources always use `=`); an empty value is a real
argument (`--tools ""`, `--system-prompt ""`). Flags the fake does not model are
accepted and ignored, as long as they follow the same two spellings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from pydantic import JsonValue

JsonObject = dict[str, JsonValue]
"""A JSON object as `json.loads` returns it."""

_BOOLEAN_FLAGS = frozenset(
    {
        "verbose",
        "include-partial-messages",
        "include-hook-events",
        "session-mirror",
        "await-initialize",
        "strict-mcp-config",
        "continue",
        "fork-session",
        "version",
        "print",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class CliArgs:
    """What the fake needs from argv."""

    model: str | None = None
    permission_mode: str = "default"
    permission_prompt_tool: str | None = None
    """`stdio` when the SDK has a `can_use_tool` callback; the CLI asks it then."""
    resume: str | None = None
    session_id: str | None = None
    mcp_servers: dict[str, JsonObject] = field(default_factory=lambda: {})
    """Every `--mcp-config` merged, later flags winning per server name."""
    tools: tuple[str, ...] | None = None
    """The `--tools` list; None when absent or `default` (the CLI's own set)."""
    allowed_tools: tuple[str, ...] = ()
    include_partial_messages: bool = False
    session_mirror: bool = False
    await_initialize: bool = False
    version: bool = False


class CliArgsError(ValueError):
    """argv holds something the fake cannot read, such as a broken --mcp-config."""


def parse_args(argv: list[str]) -> CliArgs:
    """Read the flags of one CLI invocation.

    Raises:
        CliArgsError: A flag lacks its value or an `--mcp-config` is not JSON.
    """
    values: dict[str, list[str]] = {}
    flags: set[str] = set()
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if not token.startswith("--"):
            continue
        name, equals, value = token[2:].partition("=")
        if equals:
            values.setdefault(name, []).append(value)
        elif name in _BOOLEAN_FLAGS:
            flags.add(name)
        elif index < len(argv) and not argv[index].startswith("--"):
            values.setdefault(name, []).append(argv[index])
            index += 1
        else:
            # An unknown flag without a value (a newer SDK's boolean).
            flags.add(name)

    def last(name: str) -> str | None:
        found = values.get(name)
        return found[-1] if found else None

    servers: dict[str, JsonObject] = {}
    for raw in values.get("mcp-config", []):
        servers |= _mcp_servers(raw)
    tools = last("tools")
    return CliArgs(
        model=last("model") or None,
        permission_mode=last("permission-mode") or "default",
        permission_prompt_tool=last("permission-prompt-tool"),
        resume=last("resume") or None,
        session_id=last("session-id") or None,
        mcp_servers=servers,
        tools=None if tools is None or tools == "default" else _names(tools),
        allowed_tools=_names(",".join(values.get("allowedTools", []))),
        include_partial_messages="include-partial-messages" in flags,
        session_mirror="session-mirror" in flags,
        await_initialize="await-initialize" in flags,
        version="version" in flags,
    )


def _names(raw: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in raw.replace(" ", ",").split(",") if n.strip())


def _mcp_servers(raw: str) -> dict[str, JsonObject]:
    """The `mcpServers` of one `--mcp-config`: inline JSON or a file holding it."""
    text = raw if raw.lstrip().startswith("{") else _read(raw)
    try:
        config: JsonValue = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliArgsError(f"--mcp-config is not JSON: {raw!r}") from e
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict):
        raise CliArgsError(f"--mcp-config has no `mcpServers` object: {raw!r}")
    return {
        name: cast(JsonObject, server)
        for name, server in servers.items()
        if isinstance(server, dict)
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliArgsError(f"cannot read --mcp-config file {path!r}: {e}") from e

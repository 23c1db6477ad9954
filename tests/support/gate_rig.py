"""Plays the CLI's side of the tool-call gate in-process, without a CLI.

`CliSide` asks the adapter what the CLI would ask, with exactly the tool use
IDs, tool names and inputs a test chooses: a PreToolUse callback, a
`can_use_tool` request, and `tools/call` requests to the custom tool server over
an in-memory MCP transport (the JSON-RPC stream loop of `mcp.Client`'s legacy
mode, the same one `mcp_message` requests reach through the SDK's bridge). A
real or fake CLI cannot be made to misbehave this precisely, and every gate rule
is about a misbehaving CLI.

`ScriptedCli` stands in for `claude_agent_sdk.query` inside `_segment`, so a
whole segment (its run state, transcript and result checks) runs against one
script per segment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    DeferredToolUse,
    HookCallback,
    HookMatcher,
    Message,
    PermissionResult,
    ResultMessage,
    ToolPermissionContext,
)
from mcp import Client
from mcp.types import TextContent

from dex_agents.claude import _segment
from dex_agents.claude._gate import ToolCallGate
from dex_agents.claude._hooks import ToolPermissions
from dex_agents.claude._mcp_server import TOOL_USE_ID_META_KEY, build_custom_tool_server
from dex_agents.claude._tools import CustomTool

SESSION_ID = "claude-session-1"
"""The Claude session ID every scripted result reports."""

CanUseTool = Callable[
    [str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]
]


@dataclass(frozen=True, slots=True)
class Served:
    """What the custom tool server answered to one `tools/call`."""

    text: str
    is_error: bool

    @property
    def refused(self) -> bool:
        """The server refused to run the call (the gate did not permit it)."""
        return self.is_error and "did not run" in self.text


@dataclass(kw_only=True)
class CliSide:
    """The CLI's requests to the adapter, one call per request."""

    hook: HookCallback
    permission: CanUseTool
    client: Client
    store: Any = None
    """The segment's SessionStore when a segment runs, for `mirror`."""

    @classmethod
    @asynccontextmanager
    async def for_permissions(
        cls,
        permissions: ToolPermissions,
        gate: ToolCallGate,
        tools: Mapping[str, CustomTool],
    ) -> AsyncIterator[CliSide]:
        """Talk to one `ToolPermissions` and a custom tool server over its gate."""
        config = build_custom_tool_server("tools", tools, gate)
        async with Client(config["instance"], mode="legacy") as client:
            yield cls(
                hook=permissions.pre_tool_use,
                permission=permissions.can_use_tool,
                client=client,
            )

    @classmethod
    @asynccontextmanager
    async def for_options(cls, options: ClaudeAgentOptions) -> AsyncIterator[CliSide]:
        """Talk to what a segment handed `query()`: its hook, can_use_tool, server."""
        matchers: list[HookMatcher] = (options.hooks or {})["PreToolUse"]
        # The adapter gives the CLI exactly one PreToolUse matcher with one hook.
        ((hook,),) = [m.hooks for m in matchers]
        servers = cast(Mapping[str, Any], options.mcp_servers)
        assert options.can_use_tool is not None
        async with Client(servers["tools"]["instance"], mode="legacy") as client:
            yield cls(
                hook=hook,
                permission=options.can_use_tool,
                client=client,
                store=options.session_store,
            )

    async def pre_tool_use(
        self, name: str, tool_input: dict[str, Any], tool_use_id: str, **extra: Any
    ) -> dict[str, Any]:
        """The adapter's answer to one PreToolUse callback, `hookSpecificOutput`."""
        hook_input: Any = {
            "session_id": SESSION_ID,
            "transcript_path": "/transcript.jsonl",
            "cwd": "/",
            "hook_event_name": "PreToolUse",
            "tool_name": name,
            "tool_input": tool_input,
            "tool_use_id": tool_use_id,
            **extra,
        }
        output: Any = await self.hook(hook_input, tool_use_id, {"signal": None})
        return output["hookSpecificOutput"]

    async def decision(
        self, name: str, tool_input: dict[str, Any], tool_use_id: str
    ) -> str:
        """Just the `permissionDecision` of one PreToolUse callback."""
        output = await self.pre_tool_use(name, tool_input, tool_use_id)
        return output["permissionDecision"]

    async def can_use_tool(
        self, name: str, tool_input: dict[str, Any], tool_use_id: str
    ) -> PermissionResult:
        """The adapter's answer to one `can_use_tool` request."""
        return await self.permission(
            name, tool_input, ToolPermissionContext(tool_use_id=tool_use_id)
        )

    async def call(
        self, name: str, arguments: dict[str, Any], tool_use_id: str | None
    ) -> Served:
        """One `tools/call`, with the tool use ID in `_meta` as CLI 2.1.327 sends it."""
        meta: Any = None if tool_use_id is None else {TOOL_USE_ID_META_KEY: tool_use_id}
        result = await self.client.call_tool(name, arguments, meta=meta)
        text = "".join(b.text for b in result.content if isinstance(b, TextContent))
        return Served(text=text, is_error=bool(result.is_error))

    async def mirror(self, *entries: dict[str, Any]) -> None:
        """Mirror transcript entries into the segment's SessionStore."""
        assert self.store is not None, "mirror needs a segment's SessionStore"
        key: Any = {"project_key": "project", "session_id": SESSION_ID}
        await self.store.append(key, list(entries))


Script = Callable[[CliSide], Awaitable[ResultMessage]]
"""One segment's CLI: asks the adapter things, then returns its result."""


class ScriptedCli:
    """Replaces `query` in `_segment` with one script per segment, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *scripts: Script) -> None:
        self._scripts = list(scripts)
        monkeypatch.setattr(_segment, "query", self._query)

    @property
    def remaining(self) -> int:
        """Scripts not played yet."""
        return len(self._scripts)

    async def _query(
        self, *, prompt: object, options: ClaudeAgentOptions
    ) -> AsyncIterator[Message]:
        del prompt  # A script decides what the CLI does; the prompt is not read.
        script = self._scripts.pop(0)
        async with CliSide.for_options(options) as side:
            result = await script(side)
        yield result


def completed(text: str = "done") -> ResultMessage:
    """A successful result that ends the turn."""
    return ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=1,
        session_id=SESSION_ID,
        stop_reason="end_turn",
        terminal_reason="completed",
        result=text,
    )


def deferred(
    tool_use_id: str | None, name: str = "", tool_input: dict[str, Any] | None = None
) -> ResultMessage:
    """A result that says the CLI deferred `tool_use_id` (None: names no call)."""
    return ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=1,
        session_id=SESSION_ID,
        stop_reason="tool_deferred",
        terminal_reason="tool_deferred",
        result="",
        deferred_tool_use=None
        if tool_use_id is None
        else DeferredToolUse(id=tool_use_id, name=name, input=dict(tool_input or {})),
    )


def tool_use_entry(uuid: str, tool_use_id: str, name: str) -> dict[str, Any]:
    """A transcript `assistant` entry holding one tool_use block."""
    return {
        "type": "assistant",
        "uuid": uuid,
        "sessionId": SESSION_ID,
        "message": {
            "id": f"msg-{uuid}",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_use_id, "name": name}],
        },
    }


def tool_result_entry(uuid: str, tool_use_id: str, text: str) -> dict[str, Any]:
    """A transcript `user` entry holding the tool_result of `tool_use_id`."""
    return {
        "type": "user",
        "uuid": uuid,
        "sessionId": SESSION_ID,
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
            ],
        },
    }

"""Whether and how the fake Claude CLI runs one tool call.

The order copies CLI 2.1.327 (reference sections b to g):

1. Every PreToolUse hook whose matcher fits runs, with the model's input. Their
   decisions combine as deny over defer over ask over allow. A deny becomes the
   tool result `PreToolUse:<tool> hook error: <reason>`; a defer leaves the call
   without a result; an allow runs the call with the `updatedInput` of the
   allowing hooks (a deferral keeps the original input).
2. `ask`, or no decision, goes to the host: an `allowedTools` entry or
   `bypassPermissions` allows an undecided call, `dontAsk` denies it without
   asking, and otherwise `can_use_tool` decides when the SDK registered it
   (`--permission-prompt-tool stdio`). An explicit `ask` reaches `can_use_tool`
   even under `dontAsk`.
3. Allowed calls run: SDK and HTTP MCP tools through their server, `Bash` as
   `bash -c` in the working directory, `Agent` as a subagent.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, cast

from pydantic import JsonValue

from ._fake_cli_args import CliArgs, JsonObject
from ._fake_cli_mcp import McpCallError, McpServers
from ._fake_cli_wire import Wire

AGENT_TOOLS = ("Agent", "Task")
"""CLI 2.1.327 lists the subagent tool as `Task` and runs calls named `Agent`."""

_DONT_ASK = (
    "Permission to use {tool} has been denied because Claude Code is running in "
    "don't ask mode. IMPORTANT: You *may* attempt to accomplish this action using "
    "other tools that might naturally be used to accomplish this goal, e.g. using "
    "head instead of cat. But you *should not* attempt to work around this denial "
    "in malicious ways, e.g. do not use your ability to run tests to execute "
    "non-test actions. You should only try to work around this restriction in "
    "reasonable ways that do not attempt to bypass the intent behind this denial. "
    "If you believe this capability is essential to complete the user's request, "
    "STOP and explain to the user what you were trying to do and why you need "
    "this permission. Let the user decide how to proceed."
)
_NOT_GRANTED = (
    "Claude requested permissions to use {tool}, but you haven't granted it yet."
)
_DECISION_RANK = {"deny": 4, "defer": 3, "ask": 2, "allow": 1}
_HOOK_TIMEOUT_S = 60.0
_BASH_TIMEOUT_MS = 120_000


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolUse:
    """One tool_use block of a model reply."""

    id: str
    name: str
    input: dict[str, JsonValue]


@dataclass(frozen=True, kw_only=True, slots=True)
class Caller:
    """Who makes a call: the main conversation, or a subagent."""

    prompt_id: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """What the PreToolUse hooks decided together."""

    kind: Literal["allow", "deny", "defer", "ask", "none"]
    reason: str = ""
    updated_input: dict[str, JsonValue] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """The outcome of one call: a tool result, or a deferral."""

    content: str | list[JsonObject] = ""
    is_error: bool = False
    tool_use_result: JsonValue = None
    """The transcript's `toolUseResult`, the tool's own view of its output."""
    permission: JsonObject | None = None
    """The transcript's `permissionDecision`."""
    denied: bool = False
    deferred: bool = False


AgentRunner = Callable[[ToolUse, dict[str, JsonValue], Caller], Awaitable[ToolResult]]
HookInputBase = Callable[[Caller], JsonObject]


class Tools:
    """The permission pipeline and tool runners of one CLI process."""

    def __init__(
        self,
        *,
        wire: Wire,
        args: CliArgs,
        mcp: McpServers,
        cwd: str,
        builtin: tuple[str, ...],
        hook_input: HookInputBase,
        run_agent: AgentRunner,
    ) -> None:
        self._wire = wire
        self._args = args
        self._mcp = mcp
        self._cwd = cwd
        self._builtin = builtin
        self._hook_input = hook_input
        self._run_agent = run_agent
        self.hooks: list[JsonObject] = []
        """PreToolUse matchers from the initialize request."""
        self.permission_mode = args.permission_mode

    async def handle(
        self, use: ToolUse, caller: Caller, *, hooks: bool = True
    ) -> ToolResult:
        """Decide one call and run it if allowed; `hooks=False` skips PreToolUse."""
        if not self.offers(use.name):
            # The CLI rejects a tool it does not offer before any hook runs.
            return _error(f"No such tool available: {use.name}")
        decision = await self.decide(use, caller) if hooks else Decision(kind="none")
        match decision.kind:
            case "deny":
                reason = decision.reason or "Blocked by hook"
                return _denied(
                    f"PreToolUse:{use.name} hook error: {reason}",
                    {
                        "decision": "reject",
                        "source": "hook",
                        "reasonType": "hook",
                        "reasonCode": "hook:PreToolUse",
                    },
                )
            case "defer":
                return ToolResult(deferred=True)
            case "allow":
                accepted: JsonObject = {
                    "decision": "accept",
                    "source": "hook",
                    "reasonType": "hook",
                }
                return await self.run(
                    use, decision.updated_input or use.input, caller, accepted
                )
            case "ask" | "none":
                return await self._ask_host(use, decision, caller)

    async def decide(self, use: ToolUse, caller: Caller) -> Decision:
        """Run every matching PreToolUse hook with the call's input and combine."""
        ids = [
            (str(callback_id), _timeout(matcher))
            for matcher in self.hooks
            if _matches(matcher.get("matcher"), use.name)
            for callback_id in _list(matcher.get("hookCallbackIds"))
        ]
        if not ids:
            return Decision(kind="none")
        hook_input = self._hook_input(caller) | {
            "hook_event_name": "PreToolUse",
            "tool_name": use.name,
            "tool_input": use.input,
            "tool_use_id": use.id,
        }
        if (server := self._mcp.server_of(use.name)) is not None:
            hook_input["mcp_server"] = {"name": server.name, "source": server.kind}
        if caller.agent_id is not None:
            hook_input |= {"agent_id": caller.agent_id, "agent_type": caller.agent_type}
        outputs = await asyncio.gather(
            *(
                self._hook(callback_id, timeout, hook_input, use.id)
                for callback_id, timeout in ids
            )
        )
        decisions = [d for d in map(_decision_of, outputs) if d.kind != "none"]
        if not decisions:
            return Decision(kind="none")
        winner = max(decisions, key=lambda d: _DECISION_RANK[d.kind])
        updated: dict[str, JsonValue] | None = None
        if winner.kind == "allow":
            # An allow's updatedInput replaces the input (the last one wins); a
            # deferral never carries it (CLI 2.1.327, reference d15-d17).
            rewrites = [d.updated_input for d in decisions if d.kind == "allow"]
            updated = next((u for u in reversed(rewrites) if u is not None), None)
        return Decision(kind=winner.kind, reason=winner.reason, updated_input=updated)

    async def _hook(
        self, callback_id: str, timeout: float, hook_input: JsonObject, use_id: str
    ) -> JsonObject:
        request: JsonObject = {
            "subtype": "hook_callback",
            "callback_id": callback_id,
            "input": hook_input,
            "tool_use_id": use_id,
        }
        try:
            async with asyncio.timeout(timeout):
                return await self._wire.request(request)
        except Exception:
            # A failing or silent hook decides nothing; the call goes on.
            return {}

    async def _ask_host(
        self, use: ToolUse, decision: Decision, caller: Caller
    ) -> ToolResult:
        if decision.kind == "none":
            if (
                self._allowed_by_rule(use.name)
                or self.permission_mode == "bypassPermissions"
            ):
                accepted: JsonObject = {"decision": "accept", "source": "config"}
                return await self.run(use, use.input, caller, accepted)
            if self.permission_mode == "dontAsk":
                message = _DONT_ASK.format(tool=use.name)
                self._wire.send(
                    {
                        "type": "system",
                        "subtype": "permission_denied",
                        "tool_name": use.name,
                        "tool_use_id": use.id,
                        "decision_reason_type": "mode",
                        "message": message,
                    }
                )
                return _denied(message, {"decision": "reject", "source": "mode"})
        if self._args.permission_prompt_tool != "stdio":
            return _denied(_NOT_GRANTED.format(tool=use.name), None)
        request: JsonObject = {
            "subtype": "can_use_tool",
            "tool_name": use.name,
            "input": use.input,
            "tool_use_id": use.id,
        }
        if decision.kind == "ask":
            request |= {
                "decision_reason": decision.reason,
                "decision_reason_type": "hook",
                "decision_reason_hook_event": "PreToolUse",
                "decision_reason_hook_source": "settings",
            }
        if (server := self._mcp.server_of(use.name)) is not None:
            request["mcp_server"] = {"name": server.name, "source": server.kind}
            tool = use.name.removeprefix(f"mcp__{server.name}__")
            request["display_name"] = tool[:1].upper() + tool[1:]
        if caller.agent_id is not None:
            request["agent_id"] = caller.agent_id
        try:
            answer = await self._wire.request(request)
        except Exception as e:
            return _denied(str(e), None)
        if answer.get("behavior") == "allow":
            updated = answer.get("updatedInput")
            tool_input = (
                cast(dict[str, JsonValue], updated)
                if isinstance(updated, dict)
                else use.input
            )
            accepted = {
                "decision": "accept",
                "source": "user_temporary",
                "grantScope": "once",
            }
            return await self.run(use, tool_input, caller, accepted)
        return _denied(
            str(answer.get("message", "")), {"decision": "reject", "source": "user"}
        )

    def offers(self, name: str) -> bool:
        """Whether the model may call `name`: an enabled built-in or a served tool."""
        if name in AGENT_TOOLS:
            return any(t in self._builtin for t in AGENT_TOOLS)
        if name.startswith("mcp__"):
            return self._mcp.find(name) is not None
        return name in self._builtin

    def _allowed_by_rule(self, name: str) -> bool:
        return any(
            rule == name or (rule.startswith("mcp__") and name.startswith(f"{rule}__"))
            for rule in self._args.allowed_tools
        )

    async def run(
        self,
        use: ToolUse,
        tool_input: dict[str, JsonValue],
        caller: Caller,
        permission: JsonObject | None,
    ) -> ToolResult:
        """Run an allowed call with its final input."""
        if use.name in AGENT_TOOLS:
            result = await self._run_agent(use, tool_input, caller)
        elif use.name.startswith("mcp__"):
            result = await self._run_mcp(use, tool_input)
        elif use.name == "Bash":
            result = await self._run_bash(tool_input)
        else:
            result = _error(f"the fake Claude CLI cannot run {use.name}")
        return ToolResult(
            content=result.content,
            is_error=result.is_error,
            tool_use_result=result.tool_use_result,
            permission=permission,
        )

    async def _run_mcp(
        self, use: ToolUse, tool_input: dict[str, JsonValue]
    ) -> ToolResult:
        found = self._mcp.find(use.name)
        if found is None:
            return _error(f"No such tool available: {use.name}")
        server, tool = found
        try:
            result = await self._mcp.call(
                server, str(tool.get("name")), tool_input, use.id
            )
        except McpCallError as e:
            return ToolResult(
                content=str(e), is_error=True, tool_use_result=f"Error: {e}"
            )
        blocks = [_claude_block(b) for b in _list(result.get("content"))]
        return ToolResult(
            content=blocks,
            is_error=result.get("isError") is True,
            tool_use_result=cast(JsonValue, blocks),
        )

    async def _run_bash(self, tool_input: dict[str, JsonValue]) -> ToolResult:
        command = str(tool_input.get("command", ""))
        timeout = tool_input.get("timeout")
        limit_ms = timeout if isinstance(timeout, int) else _BASH_TIMEOUT_MS
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=self._cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        interrupted = False
        try:
            async with asyncio.timeout(limit_ms / 1000):
                out, err = await process.communicate()
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            interrupted = True
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        output = "\n".join(p for p in (stdout.rstrip("\n"), stderr.rstrip("\n")) if p)
        failed = process.returncode != 0
        return ToolResult(
            content=f"Exit code {process.returncode}\n{output}" if failed else output,
            is_error=failed,
            tool_use_result={
                "stdout": stdout.rstrip("\n"),
                "stderr": stderr.rstrip("\n"),
                "interrupted": interrupted,
                "isImage": False,
                "noOutputExpected": False,
            },
        )


def _error(message: str) -> ToolResult:
    text = f"<tool_use_error>Error: {message}</tool_use_error>"
    return ToolResult(content=text, is_error=True, tool_use_result=f"Error: {text}")


def _denied(message: str, permission: JsonObject | None) -> ToolResult:
    return ToolResult(
        content=message,
        is_error=True,
        tool_use_result=f"Error: {message}",
        permission=permission,
        denied=True,
    )


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _timeout(matcher: JsonObject) -> float:
    value = matcher.get("timeout")
    return float(value) if isinstance(value, int | float) else _HOOK_TIMEOUT_S


def _matches(matcher: JsonValue, tool_name: str) -> bool:
    """Claude Code matchers: empty or `*` for all, else names or a regex."""
    if matcher is None or matcher in ("", "*"):
        return True
    pattern = str(matcher)
    try:
        return re.fullmatch(pattern, tool_name) is not None
    except re.error:
        return pattern == tool_name


def _decision_of(output: JsonObject) -> Decision:
    specific = output.get("hookSpecificOutput")
    if isinstance(specific, dict):
        kind = specific.get("permissionDecision")
        updated = specific.get("updatedInput")
        if kind in ("allow", "deny", "ask", "defer"):
            return Decision(
                kind=kind,
                reason=str(specific.get("permissionDecisionReason") or ""),
                updated_input=updated if isinstance(updated, dict) else None,
            )
    match output.get("decision"):
        case "block":
            return Decision(kind="deny", reason=str(output.get("reason") or ""))
        case "approve":
            return Decision(kind="allow", reason=str(output.get("reason") or ""))
        case _:
            return Decision(kind="none")


def _claude_block(block: JsonValue) -> JsonObject:
    """An MCP content block as a Claude content block (images change shape)."""
    if not isinstance(block, dict):
        return {"type": "text", "text": str(block)}
    if block.get("type") == "image":
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": block.get("mimeType"),
                "data": block.get("data"),
            },
        }
    return cast(JsonObject, block)

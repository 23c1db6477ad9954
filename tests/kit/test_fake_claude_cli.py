"""The fake Claude CLI through plain `claude_agent_sdk.query()`, no adapter.

Tests taking the `cli` fixture run twice: against the fake, and against the real
bundled CLI 2.1.327 talking to the scripted Messages API, so the fake is held to
what the real CLI does. The rest cover fake-only script commands and edge cases.
"""

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    InMemorySessionStore,
    McpSdkServerConfig,
    Message,
    PermissionResultAllow,
    PermissionResultDeny,
    PreToolUseHookSpecificOutput,
    ProcessError,
    ResultError,
    ResultMessage,
    SessionKey,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolPermissionContext,
    ToolUseBlock,
    project_key_for_directory,
    query,
)
from mcp.server import Server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.testing._hermetic import (
    bundled_cli_path,
    hermetic_cli_env,
    is_scrubbed_variable,
)
from dex_agents.testing._refusing_proxy import RefusingProxy
from support.fake_cli import (
    FAKE_CLAUDE_GATE_DIR_ENV,
    FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV,
    fake_claude_cli_path,
)

CONTINUE = "Continue from where you left off."
DONT_ASK = (
    "Permission to use mcp__tools__refund has been denied because Claude Code is "
    "running in don't ask mode."
)
Kind = Literal["fake", "real"]


@dataclass
class Cli:
    """One CLI to drive: where it is, its environment and working directory."""

    kind: Kind
    path: Path
    env: dict[str, str]
    cwd: Path
    gate_dir: Path

    def options(self, **kwargs: Any) -> ClaudeAgentOptions:
        kwargs.setdefault("tools", [])
        return ClaudeAgentOptions(
            cli_path=self.path,
            env=self.env | kwargs.pop("env", {}),
            cwd=self.cwd,
            setting_sources=[],
            include_partial_messages=True,
            **kwargs,
        )


@pytest.fixture
def fake(tmp_path: Path) -> Cli:
    gate_dir = tmp_path / "gates"
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {FAKE_CLAUDE_GATE_DIR_ENV: str(gate_dir)}
    return Cli(
        kind="fake", path=fake_claude_cli_path(), env=env, cwd=cwd, gate_dir=gate_dir
    )


@pytest.fixture(params=["fake", "real"])
async def cli(
    request: pytest.FixtureRequest,
    fake: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Cli]:
    """The fake, then the real CLI against the mock API (which must serve all)."""
    if request.param == "fake":
        yield fake
        return
    path = bundled_cli_path()
    if path is None:
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail("claude_agent_sdk/_bundled/claude is missing")
        pytest.skip("claude_agent_sdk/_bundled/claude is missing")
    for name in list(os.environ):
        if is_scrubbed_variable(name):
            monkeypatch.delenv(name)
    async with MockMessagesApi() as api, RefusingProxy() as proxy:
        env = hermetic_cli_env(tmp_path / "cli", api=api, proxy=proxy)
        yield Cli(kind="real", path=path, env=env, cwd=fake.cwd, gate_dir=fake.gate_dir)
        assert api.unserved == []
        assert proxy.attempts == []


@dataclass
class Ledger:
    """An SDK MCP server with `lookup` (read-only) and `refund` that records calls.

    Built on the low-level `mcp` server because `@tool` handlers never see
    `_meta`, where the CLI puts the tool use ID.
    """

    calls: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)

    def server(self) -> McpSdkServerConfig:
        schema = {
            "type": "object",
            "properties": {"orderId": {"type": "string"}},
            "required": ["orderId"],
        }
        tools = [
            Tool(
                name="lookup",
                description="Look up an order",
                input_schema=schema,
                annotations=ToolAnnotations(read_only_hint=True),
            ),
            Tool(name="refund", description="Refund an order", input_schema=schema),
        ]

        async def list_tools(
            ctx: object, params: PaginatedRequestParams | None
        ) -> ListToolsResult:
            return ListToolsResult(tools=tools)

        async def call_tool(
            ctx: object, params: CallToolRequestParams
        ) -> CallToolResult:
            args = dict(params.arguments or {})
            use_id = (params.meta or {}).get("claudecode/toolUseId")
            self.calls.append((params.name, args, str(use_id) if use_id else None))
            order = args.get("orderId")
            text = (
                f"order {order} is shipped"
                if params.name == "lookup"
                else f"refunded order {order}"
            )
            return CallToolResult(content=[TextContent(type="text", text=text)])

        server = Server(
            "tools", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
        )
        return McpSdkServerConfig(type="sdk", name="tools", instance=server)

    def runs(self, name: str) -> list[dict[str, Any]]:
        return [args for tool, args, _ in self.calls if tool == name]


@dataclass
class Hook:
    """A PreToolUse hook that answers one decision and records its inputs."""

    decision: Literal["allow", "deny", "ask", "defer"] | None
    reason: str = ""
    updated: dict[str, Any] | None = None
    only: str | None = None
    """Decide only for this tool; others get no decision."""
    inputs: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = dict(input_data)
        self.inputs.append(data)
        if self.decision is None or (self.only and data["tool_name"] != self.only):
            return {}
        output: PreToolUseHookSpecificOutput = {
            "hookEventName": "PreToolUse",
            "permissionDecision": self.decision,
        }
        if self.reason:
            output["permissionDecisionReason"] = self.reason
        if self.updated is not None:
            output["updatedInput"] = self.updated
        return {"hookSpecificOutput": output}

    def matcher(self) -> dict[str, list[HookMatcher]]:
        return {"PreToolUse": [HookMatcher(matcher=None, hooks=[self])]}


@dataclass
class Asker:
    """A `can_use_tool` callback that records requests and answers one way."""

    allow: bool = True
    message: str = "no"
    requests: list[tuple[str, dict[str, Any], ToolPermissionContext]] = field(
        default_factory=list
    )

    async def __call__(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        self.requests.append((tool_name, tool_input, context))
        if self.allow:
            return PermissionResultAllow()
        return PermissionResultDeny(message=self.message)


async def run(prompt: str, options: ClaudeAgentOptions) -> list[Message]:
    return [message async for message in query(prompt=prompt, options=options)]


async def resume(
    options: ClaudeAgentOptions, messages: list[Message] | None = None
) -> list[Message]:
    """Resume with no prompt, holding stdin open until the result arrives.

    Messages go into `messages` as they come, so a caller still has them when
    the SDK raises after the result.
    """
    seen = asyncio.Event()

    async def nothing() -> AsyncIterator[dict[str, Any]]:
        await seen.wait()
        return
        yield {}

    messages = [] if messages is None else messages
    async for message in query(prompt=nothing(), options=options):
        messages.append(message)
        if isinstance(message, ResultMessage):
            seen.set()
    return messages


def result_of(messages: list[Message]) -> ResultMessage:
    [result] = [m for m in messages if isinstance(m, ResultMessage)]
    return result


def init_of(messages: list[Message]) -> SystemMessage:
    return next(
        m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"
    )


def tool_uses(messages: list[Message]) -> list[ToolUseBlock]:
    return [
        b
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    ]


def session_key(cli: Cli, session_id: str) -> SessionKey:
    return {"project_key": project_key_for_directory(cli.cwd), "session_id": session_id}


def entries(
    store: InMemorySessionStore, cli: Cli, session_id: str
) -> list[dict[str, Any]]:
    return [dict(e) for e in store.get_entries(session_key(cli, session_id))]


def deferrals(store_entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["attachment"]
        for e in store_entries
        if e.get("type") == "attachment"
        and e["attachment"].get("type") == "hook_deferred_tool"
    ]


async def test_say(cli: Cli) -> None:
    messages = await run("dex-script: say hello", cli.options())
    result = result_of(messages)
    assert (result.subtype, result.is_error, result.result) == (
        "success",
        False,
        "said: hello",
    )
    assert (result.num_turns, result.terminal_reason, result.stop_reason) == (
        1,
        "completed",
        "end_turn",
    )
    init = init_of(messages)
    model = init.data["model"]
    assert init.data["claude_code_version"] == "2.1.332"
    assert init.data["permissionMode"] == "default"
    assert result.model_usage is not None
    assert list(result.model_usage) == [model]
    assert result.model_usage[model].get("provider") == "firstParty"
    assert result.usage is not None and result.usage["input_tokens"] == 20
    assert result.total_cost_usd is not None and result.total_cost_usd > 0
    [assistant] = [m for m in messages if isinstance(m, AssistantMessage)]
    assert assistant.model.startswith(model)
    assert assistant.message_id is not None
    events = [m.event for m in messages if isinstance(m, StreamEvent)]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(d["text"] for d in deltas) == "said: hello"
    [stop] = [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"]
    assert stop == "end_turn"


async def test_fake_names_a_dated_response_model(fake: Cli) -> None:
    messages = await run("say hello", fake.options(model="opus"))
    assert init_of(messages).data["model"] == "claude-opus-5-5"
    [assistant] = [m for m in messages if isinstance(m, AssistantMessage)]
    assert assistant.model == "claude-opus-5-5-20261001"
    assert result_of(messages).result == "said: hello"


async def test_inline_tool_gets_the_tool_use_id(cli: Cli) -> None:
    ledger, hook = Ledger(), Hook("allow")
    options = cli.options(mcp_servers={"tools": ledger.server()}, hooks=hook.matcher())
    messages = await run('dex-script: call lookup {"orderId": "7"}', options)
    [use] = tool_uses(messages)
    assert use.name == "mcp__tools__lookup"
    assert ledger.calls == [("lookup", {"orderId": "7"}, use.id)]
    result = result_of(messages)
    assert (result.result, result.num_turns) == ("done: order 7 is shipped", 2)
    [seen] = hook.inputs
    assert seen["hook_event_name"] == "PreToolUse"
    assert (seen["tool_name"], seen["tool_input"], seen["tool_use_id"]) == (
        "mcp__tools__lookup",
        {"orderId": "7"},
        use.id,
    )
    assert seen["session_id"] == result.session_id
    assert seen["permission_mode"] == "default"
    assert Path(seen["cwd"]) == cli.cwd
    assert seen["transcript_path"].endswith(f"{result.session_id}.jsonl")


async def test_defer_then_resume_runs_the_call_once(cli: Cli) -> None:
    ledger, store = Ledger(), InMemorySessionStore()
    first_hook = Hook("defer")
    first = result_of(
        await run(
            'dex-script: call refund {"orderId": "7"}',
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks=first_hook.matcher(),
                session_store=store,
            ),
        )
    )
    assert (first.terminal_reason, first.stop_reason, first.result) == (
        "tool_deferred",
        "tool_deferred",
        "",
    )
    assert first.deferred_tool_use is not None
    deferred = first.deferred_tool_use
    assert (deferred.name, deferred.input) == ("mcp__tools__refund", {"orderId": "7"})
    assert ledger.calls == []
    written = entries(store, cli, first.session_id)
    [deferral] = deferrals(written)
    assert (deferral["toolUseID"], deferral["toolInput"]) == (
        deferred.id,
        {"orderId": "7"},
    )
    assert [e["type"] for e in written[-2:]] == ["last-prompt", "cost-state"]

    hook = Hook("allow")
    messages = await resume(
        cli.options(
            mcp_servers={"tools": ledger.server()},
            hooks=hook.matcher(),
            session_store=store,
            resume=first.session_id,
            extra_args={"await-initialize": None},
        )
    )
    second = result_of(messages)
    assert (second.result, second.terminal_reason) == (
        "done: refunded order 7",
        "completed",
    )
    assert second.session_id == first.session_id
    [seen] = hook.inputs
    assert (seen["tool_input"], seen["tool_use_id"]) == ({"orderId": "7"}, deferred.id)
    assert ledger.calls == [("refund", {"orderId": "7"}, deferred.id)]
    # Usage is the segment's own, modelUsage and cost the session's.
    assert second.usage is not None and second.usage["input_tokens"] == 20
    assert second.model_usage is not None and first.model_usage is not None
    [model] = second.model_usage
    assert second.model_usage[model]["inputTokens"] == 40
    assert second.total_cost_usd is not None and first.total_cost_usd is not None
    assert second.total_cost_usd > first.total_cost_usd
    resumed = entries(store, cli, first.session_id)[len(written) :]
    [meta] = [e for e in resumed if e.get("isMeta")]
    assert meta["message"]["content"] == CONTINUE
    # Written once stdin closed, after the result: the process waited for it.
    assert [e["type"] for e in resumed[-3:]] == ["last-prompt", "mode", "cost-state"]


async def test_deferral_keeps_the_original_input(cli: Cli) -> None:
    """An allow's updatedInput is applied when the call runs, never recorded."""
    ledger, store = Ledger(), InMemorySessionStore()
    deferring, rewriting = Hook("defer"), Hook("allow", updated={"orderId": "8"})
    hooks = {"PreToolUse": [HookMatcher(matcher=None, hooks=[deferring, rewriting])]}
    first = result_of(
        await run(
            'dex-script: call refund {"orderId": "7"}',
            cli.options(
                mcp_servers={"tools": ledger.server()}, hooks=hooks, session_store=store
            ),
        )
    )
    assert first.deferred_tool_use is not None
    assert first.deferred_tool_use.input == {"orderId": "7"}
    assert deferrals(entries(store, cli, first.session_id))[0]["toolInput"] == {
        "orderId": "7"
    }
    allowing, rewriting = Hook("allow"), Hook("allow", updated={"orderId": "9"})
    hooks = {"PreToolUse": [HookMatcher(matcher=None, hooks=[allowing, rewriting])]}
    second = result_of(
        await resume(
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks=hooks,
                session_store=store,
                resume=first.session_id,
                extra_args={"await-initialize": None},
            )
        )
    )
    assert [i["tool_input"] for i in allowing.inputs] == [{"orderId": "7"}]
    assert ledger.runs("refund") == [{"orderId": "9"}]
    assert second.result == "done: refunded order 9"


async def test_two_deferred_calls_name_the_last(cli: Cli) -> None:
    ledger, store = Ledger(), InMemorySessionStore()
    prompt = 'dex-script: call refund {"orderId": "1"} && call refund {"orderId": "2"}'
    first = result_of(
        await run(
            prompt,
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks=Hook("defer").matcher(),
                session_store=store,
            ),
        )
    )
    assert first.deferred_tool_use is not None
    assert first.deferred_tool_use.input == {"orderId": "2"}
    written = deferrals(entries(store, cli, first.session_id))
    assert [d["toolInput"] for d in written] == [{"orderId": "1"}, {"orderId": "2"}]
    hook = Hook("allow")
    second = result_of(
        await resume(
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks=hook.matcher(),
                session_store=store,
                resume=first.session_id,
                extra_args={"await-initialize": None},
            )
        )
    )
    assert [i["tool_input"] for i in hook.inputs] == [{"orderId": "2"}]
    assert ledger.runs("refund") == [{"orderId": "2"}]
    assert second.result == "done: refunded order 2"


async def test_refused_second_call_is_called_again_alone(cli: Cli) -> None:
    """The adapter's one-deferral-per-segment strategy (reference g2/g3)."""
    ledger, store = Ledger(), InMemorySessionStore()
    refusal = "did not run. Call again by itself."
    deferring = Hook("defer")
    refusing = Hook("deny", reason=refusal)

    async def first_defers(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        hook = refusing if deferring.inputs else deferring
        return await hook(input_data, tool_use_id, context)

    prompt = 'dex-script: call refund {"orderId": "1"} && call refund {"orderId": "2"}'
    first = result_of(
        await run(
            prompt,
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[first_defers])]},
                session_store=store,
            ),
        )
    )
    assert first.deferred_tool_use is not None
    assert first.deferred_tool_use.input == {"orderId": "1"}
    hook = Hook("allow")
    messages = await resume(
        cli.options(
            mcp_servers={"tools": ledger.server()},
            hooks=hook.matcher(),
            session_store=store,
            resume=first.session_id,
            extra_args={"await-initialize": None},
        )
    )
    assert [i["tool_input"] for i in hook.inputs] == [
        {"orderId": "1"},
        {"orderId": "2"},
    ]
    assert ledger.runs("refund") == [{"orderId": "1"}, {"orderId": "2"}]
    assert result_of(messages).result == "done: refunded order 1; refunded order 2"


async def test_resumed_call_can_be_deferred_again(cli: Cli) -> None:
    ledger, store = Ledger(), InMemorySessionStore()
    options = cli.options(
        mcp_servers={"tools": ledger.server()},
        hooks=Hook("defer").matcher(),
        session_store=store,
    )
    first = result_of(await run('dex-script: call refund {"orderId": "7"}', options))
    again = result_of(
        await resume(
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks=Hook("defer").matcher(),
                session_store=store,
                resume=first.session_id,
                extra_args={"await-initialize": None},
            )
        )
    )
    # CLI 2.1.327 (reference d11): the same call, without a terminal_reason.
    assert again.deferred_tool_use == first.deferred_tool_use
    assert (again.stop_reason, again.terminal_reason) == ("tool_deferred", None)
    assert len(deferrals(entries(store, cli, first.session_id))) == 2
    assert ledger.calls == []


async def test_hook_denial_reaches_the_model_with_a_prefix(cli: Cli) -> None:
    ledger = Ledger()
    options = cli.options(
        mcp_servers={"tools": ledger.server()},
        hooks=Hook("deny", reason="nope").matcher(),
    )
    messages = await run('dex-script: call refund {"orderId": "7"}', options)
    result = result_of(messages)
    assert result.result == "done: PreToolUse:mcp__tools__refund hook error: nope"
    [use] = tool_uses(messages)
    assert result.permission_denials == [
        {
            "tool_name": "mcp__tools__refund",
            "tool_use_id": use.id,
            "tool_input": {"orderId": "7"},
        }
    ]
    assert ledger.calls == []


async def test_ask_goes_to_can_use_tool(cli: Cli) -> None:
    ledger, asker = Ledger(), Asker(allow=False, message="The user rejected this call")
    options = cli.options(
        mcp_servers={"tools": ledger.server()},
        hooks=Hook("ask", reason="needs a human").matcher(),
        can_use_tool=asker,
    )
    messages = await run('dex-script: call refund {"orderId": "7"}', options)
    [(name, tool_input, context)] = asker.requests
    assert (name, tool_input) == ("mcp__tools__refund", {"orderId": "7"})
    assert context.decision_reason == "needs a human"
    assert context.tool_use_id == tool_uses(messages)[0].id
    assert result_of(messages).result == "done: The user rejected this call"
    assert ledger.calls == []


async def test_dont_ask_denies_an_undecided_call_without_asking(cli: Cli) -> None:
    ledger, asker = Ledger(), Asker()
    options = cli.options(
        mcp_servers={"tools": ledger.server()},
        hooks=Hook(None).matcher(),
        can_use_tool=asker,
        permission_mode="dontAsk",
    )
    messages = await run('dex-script: call refund {"orderId": "7"}', options)
    assert init_of(messages).data["permissionMode"] == "dontAsk"
    answer = result_of(messages).result
    assert answer is not None and answer.startswith(f"done: {DONT_ASK}")
    assert asker.requests == []
    assert ledger.calls == []


async def test_bash_runs_in_the_working_directory(cli: Cli) -> None:
    options = cli.options(tools=["Bash"], hooks=Hook("allow").matcher())
    messages = await run('dex-script: call Bash {"command": "pwd"}', options)
    assert result_of(messages).result == f"done: {cli.cwd.resolve()}"


async def test_resume_of_an_unknown_session_fails(cli: Cli) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(
        ResultError, match=f"No conversation found with session ID: {missing}"
    ):
        await run("dex-script: say hello", cli.options(resume=missing))


async def test_resumed_session_recalls_earlier_prompts(cli: Cli) -> None:
    store = InMemorySessionStore()
    first = result_of(
        await run("dex-script: say one", cli.options(session_store=store))
    )
    second = result_of(
        await run(
            "dex-script: recall",
            cli.options(session_store=store, resume=first.session_id),
        )
    )
    assert second.result == "recalled:\ndex-script: say one"


async def test_resume_without_the_server_is_unavailable(cli: Cli) -> None:
    ledger, store = Ledger(), InMemorySessionStore()
    first = result_of(
        await run(
            'dex-script: call refund {"orderId": "7"}',
            cli.options(
                mcp_servers={"tools": ledger.server()},
                hooks=Hook("defer").matcher(),
                session_store=store,
            ),
        )
    )
    messages: list[Message] = []
    options = cli.options(
        hooks=Hook("allow").matcher(),
        session_store=store,
        resume=first.session_id,
        extra_args={"await-initialize": None},
    )
    with pytest.raises(ProcessError) as raised:
        await resume(options, messages)
    # CLI 2.1.327 sends command_lifecycle after this result, so the SDK raises a
    # plain ProcessError rather than a ResultError.
    assert type(raised.value) is ProcessError
    assert raised.value.exit_code == 1
    result = result_of(messages)
    assert result.is_error
    assert result.terminal_reason == "tool_deferred_unavailable"
    assert result.result is not None
    assert result.result.startswith("mcp__tools__refund isn't available")
    assert ledger.calls == []
    assert len(deferrals(entries(store, cli, first.session_id))) == 2


async def test_resume_without_hooks_asks_can_use_tool(fake: Cli) -> None:
    """`FAKE_CLAUDE_RESUME_WITHOUT_HOOKS=1`: the resumed call skips PreToolUse."""
    ledger, store, asker = Ledger(), InMemorySessionStore(), Asker()
    first = result_of(
        await run(
            'call refund {"orderId": "7"}',
            fake.options(
                mcp_servers={"tools": ledger.server()},
                hooks=Hook("defer").matcher(),
                session_store=store,
            ),
        )
    )
    hook = Hook("deny", reason="hooks must not run")
    second = result_of(
        await resume(
            fake.options(
                mcp_servers={"tools": ledger.server()},
                hooks=hook.matcher(),
                can_use_tool=asker,
                session_store=store,
                resume=first.session_id,
                extra_args={"await-initialize": None},
                env={FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV: "1"},
            )
        )
    )
    assert hook.inputs == []
    assert first.deferred_tool_use is not None
    [(name, tool_input, context)] = asker.requests
    assert (name, tool_input) == ("mcp__tools__refund", {"orderId": "7"})
    assert context.tool_use_id == first.deferred_tool_use.id
    assert ledger.runs("refund") == [{"orderId": "7"}]
    assert second.result == "done: refunded order 7"


async def test_resume_without_await_initialize_skips_hooks(fake: Cli) -> None:
    ledger, store, asker = Ledger(), InMemorySessionStore(), Asker(allow=False)
    first = result_of(
        await run(
            'call refund {"orderId": "7"}',
            fake.options(
                mcp_servers={"tools": ledger.server()},
                hooks=Hook("defer").matcher(),
                session_store=store,
            ),
        )
    )
    hook = Hook("allow")
    second = result_of(
        await resume(
            fake.options(
                mcp_servers={"tools": ledger.server()},
                hooks=hook.matcher(),
                can_use_tool=asker,
                session_store=store,
                resume=first.session_id,
            )
        )
    )
    assert hook.inputs == []
    assert len(asker.requests) == 1
    assert ledger.calls == []
    assert second.result == "done: no"


async def test_fail_ends_with_an_error_result(fake: Cli) -> None:
    with pytest.raises(ResultError) as raised:
        await run("fail", fake.options())
    assert raised.value.exit_code == 1
    assert raised.value.subtype == "error_during_execution"
    assert raised.value.data["is_error"] is True


async def test_fail_after_results_runs_the_calls_first(fake: Cli) -> None:
    ledger = Ledger()
    options = fake.options(
        mcp_servers={"tools": ledger.server()}, hooks=Hook("allow").matcher()
    )
    with pytest.raises(ResultError):
        await run('call lookup {"orderId": "7"} ;; fail', options)
    assert ledger.runs("lookup") == [{"orderId": "7"}]


async def test_reuse_calls_under_the_first_tool_use_id(fake: Cli) -> None:
    ledger = Ledger()
    options = fake.options(
        mcp_servers={"tools": ledger.server()}, hooks=Hook("allow").matcher()
    )
    messages = await run(
        'call lookup {"orderId": "1"} ;; reuse refund {"orderId": "2"}', options
    )
    first, again = tool_uses(messages)
    assert first.id == again.id
    assert (first.name, again.name) == ("mcp__tools__lookup", "mcp__tools__refund")
    assert [(name, use_id) for name, _, use_id in ledger.calls] == [
        ("lookup", first.id),
        ("refund", first.id),
    ]
    assert result_of(messages).result == "reused refund: refunded order 2"


async def test_pause_waits_at_a_gate(fake: Cli) -> None:
    task = asyncio.create_task(run("say hi ;; pause g1", fake.options()))
    await _wait_for(fake.gate_dir / "g1.reached")
    await asyncio.sleep(0.2)
    assert not task.done()
    (fake.gate_dir / "g1").touch()
    assert result_of(await task).result == "said: hi"


async def test_stall_calls_lookup_and_streams_before_the_gate(fake: Cli) -> None:
    ledger = Ledger()
    options = fake.options(
        mcp_servers={"tools": ledger.server()}, hooks=Hook("allow").matcher()
    )
    streamed: list[str] = []

    async def consume() -> list[Message]:
        messages: list[Message] = []
        async for message in query(prompt="stall g2", options=options):
            messages.append(message)
            if (
                isinstance(message, StreamEvent)
                and message.event["type"] == "content_block_delta"
            ):
                streamed.append(message.event["delta"].get("text", ""))
        return messages

    task = asyncio.create_task(consume())
    await _wait_for(fake.gate_dir / "g2.reached")
    await asyncio.sleep(0.2)
    assert ledger.runs("lookup") == [{"orderId": "stall"}]
    assert streamed and not task.done()
    (fake.gate_dir / "g2").touch()
    messages = await task
    assert result_of(messages).result == "done: order stall is shipped"
    assert "".join(streamed).endswith("done: order stall is shipped")


async def test_subagent_answers_under_the_agent_call(fake: Cli) -> None:
    store = InMemorySessionStore()
    prompt = 'call Agent {"description": "sub", "prompt": "say sub", "subagent_type": "general-purpose"}'
    messages = await run(
        prompt,
        fake.options(
            tools=["Agent"], hooks=Hook("allow").matcher(), session_store=store
        ),
    )
    [use] = tool_uses(messages)
    assert init_of(messages).data["tools"] == ["Task"]
    [sub] = [
        m for m in messages if isinstance(m, AssistantMessage) and m.parent_tool_use_id
    ]
    assert sub.parent_tool_use_id == use.id
    assert sub.content == [TextBlock(text="said: sub")]
    main_model = init_of(messages).data["model"]
    assert not sub.model.startswith(main_model)
    result = result_of(messages)
    assert result.result == "done: said: sub"
    assert result.model_usage is not None and len(result.model_usage) == 2
    main = entries(store, fake, result.session_id)
    assert "said: sub" not in json.dumps(
        [e for e in main if e.get("type") == "assistant"][:-1]
    )
    [subpath] = await store.list_subkeys(session_key(fake, result.session_id))
    assert subpath.startswith("subagents/agent-")


async def test_subagent_calls_carry_the_agent_id(fake: Cli) -> None:
    ledger, hook = Ledger(), Hook("allow")
    prompt = 'call Agent {"description": "sub", "prompt": "call lookup {\\"orderId\\": \\"3\\"}"}'
    messages = await run(
        prompt,
        fake.options(
            tools=["Agent"],
            mcp_servers={"tools": ledger.server()},
            hooks=hook.matcher(),
        ),
    )
    agent_call, lookup = hook.inputs
    assert "agent_id" not in agent_call
    assert lookup["tool_name"] == "mcp__tools__lookup"
    assert lookup["agent_id"].startswith("a")
    assert lookup["agent_type"] == "general-purpose"
    assert ledger.runs("lookup") == [{"orderId": "3"}]
    assert result_of(messages).result == "done: done: order 3 is shipped"


async def test_resumed_process_waits_for_stdin_to_close(fake: Cli) -> None:
    """No prompt after a resume: the fake answers, then waits until stdin closes."""
    store = InMemorySessionStore()
    first = result_of(
        await run(
            'call Bash {"command": "echo resumed"}',
            fake.options(
                tools=["Bash"], hooks=Hook("defer").matcher(), session_store=store
            ),
        )
    )
    argv = [
        str(fake.path),
        "--output-format",
        "stream-json",
        "--input-format",
        "stream-json",
        "--tools",
        "Bash",
        f"--resume={first.session_id}",
        "--await-initialize",
        "--session-mirror",
    ]
    process = subprocess.Popen(
        argv,
        cwd=fake.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=os.environ | fake.env,
    )
    assert process.stdin is not None and process.stdout is not None
    initialize = {
        "type": "control_request",
        "request_id": "req_1",
        "request": {"subtype": "initialize", "hooks": None},
    }
    process.stdin.write(json.dumps(initialize).encode() + b"\n")
    process.stdin.flush()
    frames = await asyncio.to_thread(_read_until_result, process.stdout)
    await asyncio.sleep(0.3)
    assert process.poll() is None
    process.stdin.close()
    assert await asyncio.to_thread(process.wait, 10) == 0
    trailing = [json.loads(line) for line in process.stdout.read().splitlines()]
    process.stdout.close()
    result = frames[-1]
    # Without can_use_tool the CLI denies an undecided resumed call.
    assert result["result"] == (
        "done: Claude requested permissions to use Bash, but you haven't granted it yet."
    )
    mirrored = [
        e["type"]
        for f in trailing
        if f["type"] == "transcript_mirror"
        for e in f["entries"]
    ]
    assert mirrored == ["last-prompt", "mode", "cost-state"]


def _read_until_result(stdout: Any) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    for line in stdout:
        frames.append(json.loads(line))
        if frames[-1]["type"] == "result":
            return frames
    raise AssertionError(f"no result among {frames}")


class HttpMcp:
    """A minimal streamable-HTTP MCP server with one `echo` tool, answering JSON."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], str | None]] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                message = json.loads(self.rfile.read(length))
                if "id" not in message:
                    self.send_response(202)
                    self.end_headers()
                    return
                params = message.get("params", {})
                match message["method"]:
                    case "initialize":
                        result: dict[str, Any] = {
                            "protocolVersion": params["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "remote", "version": "1"},
                        }
                    case "tools/list":
                        schema = {
                            "type": "object",
                            "properties": {"word": {"type": "string"}},
                        }
                        result = {"tools": [{"name": "echo", "inputSchema": schema}]}
                    case _:
                        args = params.get("arguments", {})
                        calls.append(
                            (args, params.get("_meta", {}).get("claudecode/toolUseId"))
                        )
                        text = f"echo {args.get('word')}"
                        result = {"content": [{"type": "text", "text": text}]}
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": message["id"], "result": result}
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/mcp"

    def config(self, **extra: Any) -> dict[str, str]:
        server = {"type": "http", "url": self.url, **extra}
        return {"mcp-config": json.dumps({"mcpServers": {"remote": server}})}

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


async def test_http_mcp_tool_gets_the_tool_use_id(fake: Cli) -> None:
    with HttpMcp() as remote:
        options = fake.options(
            hooks=Hook("allow").matcher(), extra_args=remote.config()
        )
        messages = await run('call echo {"word": "hi"}', options)
    [use] = tool_uses(messages)
    assert use.name == "mcp__remote__echo"
    assert remote.calls == [({"word": "hi"}, use.id)]
    assert result_of(messages).result == "done: echo hi"


@pytest.mark.parametrize("always_load", [False, True])
async def test_http_mcp_deferral_resumes_only_when_always_loaded(
    fake: Cli, always_load: bool
) -> None:
    store = InMemorySessionStore()
    with HttpMcp() as remote:
        config = remote.config(alwaysLoad=True) if always_load else remote.config()
        first = result_of(
            await run(
                'call echo {"word": "later"}',
                fake.options(
                    hooks=Hook("defer").matcher(),
                    extra_args=config,
                    session_store=store,
                ),
            )
        )
        messages: list[Message] = []
        options = fake.options(
            hooks=Hook("allow").matcher(),
            extra_args=config | {"await-initialize": None},
            session_store=store,
            resume=first.session_id,
        )
        if always_load:
            await resume(options, messages)
        else:
            with pytest.raises(ProcessError):
                await resume(options, messages)
    result = result_of(messages)
    if always_load:
        assert result.result == "done: echo later"
        assert [args for args, _ in remote.calls] == [{"word": "later"}]
    else:
        assert result.terminal_reason == "tool_deferred_unavailable"
        assert remote.calls == []


def test_launcher_is_stable_and_executable() -> None:
    path = fake_claude_cli_path()
    assert path == fake_claude_cli_path()
    assert os.access(path, os.X_OK)
    version = subprocess.run(
        [str(path), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == "2.1.332 (Claude Code)"
    assert sys.executable in path.read_text()


async def _wait_for(path: Path, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not path.exists():
            await asyncio.sleep(0.02)

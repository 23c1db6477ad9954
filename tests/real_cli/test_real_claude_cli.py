"""The real bundled Claude Code CLI against the scripted Messages API."""

from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    InMemorySessionStore,
    Message,
    ResultMessage,
    SystemMessage,
    ToolAnnotations,
    ToolUseBlock,
    create_sdk_mcp_server,
    query,
    tool,
)

from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.testing._refusing_proxy import RefusingProxy


def options(
    cli_path: Path, env: dict[str, str], cwd: Path, **kwargs: Any
) -> ClaudeAgentOptions:
    cwd.mkdir(exist_ok=True)
    return ClaudeAgentOptions(
        cli_path=cli_path,
        env=env,
        setting_sources=[],
        tools=[],
        cwd=cwd,
        include_partial_messages=True,
        **kwargs,
    )


async def run(prompt: str, opts: ClaudeAgentOptions) -> list[Message]:
    return [message async for message in query(prompt=prompt, options=opts)]


def result_of(messages: list[Message]) -> ResultMessage:
    [result] = [m for m in messages if isinstance(m, ResultMessage)]
    return result


def assert_hermetic(api: MockMessagesApi, proxy: RefusingProxy) -> None:
    assert api.unserved == []
    assert proxy.attempts == []


async def allow(
    input_data: HookInput, tool_use_id: str | None, context: HookContext
) -> HookJSONOutput:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
        }
    }


def lookup_server(calls: list[dict[str, Any]]) -> Any:
    @tool(
        "lookup",
        "Look up an order by ID.",
        {"orderId": str},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        status = f"order {args['orderId']} is shipped"
        return {"content": [{"type": "text", "text": status}]}

    return create_sdk_mcp_server("tools", tools=[lookup])


async def test_say_hello(
    cli_path: Path,
    real_cli_env: dict[str, str],
    tmp_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> None:
    messages = await run(
        "dex-script: say hello", options(cli_path, real_cli_env, tmp_path / "w")
    )
    result = result_of(messages)
    assert result.result == "said: hello"
    assert not result.is_error
    assert result.usage is not None and result.usage["input_tokens"] == 20
    init = next(m for m in messages if isinstance(m, SystemMessage))
    assert init.data["apiKeySource"] == "ANTHROPIC_API_KEY"
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/messages?beta=true")
    assert isinstance(request.body, dict) and request.body["stream"] is True
    [assistant] = [m for m in messages if isinstance(m, AssistantMessage)]
    assert assistant.model == request.body["model"]
    assert_hermetic(api, proxy)


async def test_custom_tool_runs_once(
    cli_path: Path,
    real_cli_env: dict[str, str],
    tmp_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> None:
    calls: list[dict[str, Any]] = []
    opts = options(
        cli_path,
        real_cli_env,
        tmp_path / "w",
        mcp_servers={"tools": lookup_server(calls)},
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[allow])]},
    )
    messages = await run('dex-script: call lookup {"orderId": "7"}', opts)
    result = result_of(messages)
    assert calls == [{"orderId": "7"}]
    assert result.result == "done: order 7 is shipped"
    assert result.num_turns == 2
    assert len(api.requests) == 2
    assert_hermetic(api, proxy)


async def test_two_calls_in_one_reply(
    cli_path: Path,
    real_cli_env: dict[str, str],
    tmp_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> None:
    calls: list[dict[str, Any]] = []
    opts = options(
        cli_path,
        real_cli_env,
        tmp_path / "w",
        mcp_servers={"tools": lookup_server(calls)},
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[allow])]},
    )
    prompt = 'dex-script: call lookup {"orderId": "1"} && call lookup {"orderId": "2"}'
    messages = await run(prompt, opts)
    uses = [
        (m.message_id, block)
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, ToolUseBlock)
    ]
    assert len(uses) == 2
    assert len({message_id for message_id, _ in uses}) == 1
    assert [b.input for _, b in uses] == [{"orderId": "1"}, {"orderId": "2"}]
    assert sorted(c["orderId"] for c in calls) == ["1", "2"]
    answer = result_of(messages).result
    assert answer is not None
    assert "order 1 is shipped" in answer and "order 2 is shipped" in answer
    assert_hermetic(api, proxy)


async def test_recall_across_a_resumed_session(
    cli_path: Path,
    real_cli_env: dict[str, str],
    tmp_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> None:
    store = InMemorySessionStore()
    first = result_of(
        await run(
            "dex-script: say one",
            options(cli_path, real_cli_env, tmp_path / "w", session_store=store),
        )
    )
    assert first.result == "said: one"
    second = result_of(
        await run(
            "dex-script: recall",
            options(
                cli_path,
                real_cli_env,
                tmp_path / "w",
                session_store=store,
                resume=first.session_id,
            ),
        )
    )
    assert second.result == "recalled:\ndex-script: say one"
    assert second.session_id == first.session_id
    assert len(api.requests) == 2
    assert_hermetic(api, proxy)

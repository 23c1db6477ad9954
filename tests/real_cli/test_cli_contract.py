"""CLI behaviors the adapter relies on that the other real-CLI tests leave implicit.

`make cli-compat` (tools/cli_compat.py) runs these with the rest of the real-CLI
suite against any `claude` binary.
"""

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    InMemorySessionStore,
    Message,
    ResultMessage,
    SessionKey,
    SessionStoreEntry,
    SystemMessage,
    create_sdk_mcp_server,
    project_key_for_directory,
    query,
    tool,
)
from pydantic import JsonValue

from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.claude import _process
from dex_agents.claude._transcript import kept_entries
from dex_agents.testing import _hermetic
from dex_agents.testing._refusing_proxy import RefusingProxy

CONTINUE = "Continue from where you left off."
REFUND = 'dex-script: call refund {"orderId": "7"}'


def refund_server(calls: list[dict[str, Any]]) -> Any:
    @tool("refund", "Refund an order.", {"orderId": str})
    async def refund(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {
            "content": [{"type": "text", "text": f"refunded order {args['orderId']}"}]
        }

    return create_sdk_mcp_server("tools", tools=[refund])


def hook(decision: str) -> dict[str, list[HookMatcher]]:
    async def decide(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        return cast(
            HookJSONOutput,
            {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": decision,
                }
            },
        )

    return {"PreToolUse": [HookMatcher(matcher=None, hooks=[decide])]}


async def run(prompt: str, options: ClaudeAgentOptions) -> ResultMessage:
    messages = [m async for m in query(prompt=prompt, options=options)]
    [result] = [m for m in messages if isinstance(m, ResultMessage)]
    return result


async def resume(options: ClaudeAgentOptions) -> ResultMessage:
    """Resume with no prompt, stdin held open until the result (as the adapter does)."""
    seen = asyncio.Event()

    async def nothing() -> AsyncIterator[dict[str, Any]]:
        await seen.wait()
        return
        yield {}

    messages: list[Message] = []
    async for message in query(prompt=nothing(), options=options):
        messages.append(message)
        if isinstance(message, ResultMessage):
            seen.set()
    [result] = [m for m in messages if isinstance(m, ResultMessage)]
    return result


def texts(message: JsonValue) -> list[str]:
    assert isinstance(message, dict)
    content = message["content"]
    if isinstance(content, str):
        return [content]
    assert isinstance(content, list)
    return [
        str(b["text"]) for b in content if isinstance(b, dict) and b["type"] == "text"
    ]


def position(said: list[tuple[str, str]], role: str, text: str) -> int:
    """Where the model first saw `text` from `role`; fails if it never did."""
    found = [i for i, (r, t) in enumerate(said) if r == role and text in t]
    assert found, f"the model never saw {role} {text!r} in {said}"
    return found[0]


def test_one_variable_names_the_cli_of_the_tests_and_of_the_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`DEX_AGENTS_CLAUDE_CLI` reaches the fixtures and the adapter's segments alike."""
    variable = _process.CLI_PATH_VARIABLE
    assert variable == _hermetic.CLI_PATH_VARIABLE
    other = tmp_path / "claude"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setenv(variable, str(other))
    assert _hermetic.bundled_cli_path() == other
    assert _process.real_cli_path(None) == str(other)
    assert _process.real_cli_path("/elsewhere/claude") == "/elsewhere/claude"
    monkeypatch.setenv(variable, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=variable):
        _hermetic.bundled_cli_path()


async def test_the_cli_under_test_is_the_one_that_answers(
    cli_path: Path,
    real_cli_env: dict[str, str],
    tmp_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> None:
    """The fixtures' CLI answers with its own version, and the adapter runs it too."""
    shown = subprocess.run(
        [str(cli_path), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    version = shown.split()[0]
    cwd = tmp_path / "w"
    cwd.mkdir()
    options = ClaudeAgentOptions(
        cli_path=cli_path, env=real_cli_env, setting_sources=[], tools=[], cwd=cwd
    )
    messages = [m async for m in query(prompt="dex-script: say hi", options=options)]
    [init] = [
        m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"
    ]
    assert init.data["claude_code_version"] == version
    [request] = api.requests
    assert f"claude-cli/{version} " in request.headers["user-agent"]
    assert _process.real_cli_path(None) == str(cli_path)
    assert api.unserved == [] and proxy.attempts == []


async def test_next_turn_after_a_resumed_call_sees_the_whole_history(
    cli_path: Path,
    real_cli_env: dict[str, str],
    tmp_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> None:
    """A resume from a transcript without `last-prompt` entries continues from its end.

    The adapter never stores `last-prompt` (the CLI writes it after the result,
    so an old one would make a later resume skip what came after it); the CLI
    must then take the transcript's last entry as the leaf: the model sees the
    resumed call's result, the continuation and the answer before the new prompt.
    """
    cwd = tmp_path / "w"
    cwd.mkdir()
    calls: list[dict[str, Any]] = []
    store = InMemorySessionStore()

    def options(**kwargs: Any) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(
            cli_path=cli_path,
            env=real_cli_env,
            setting_sources=[],
            tools=[],
            cwd=cwd,
            mcp_servers={"tools": refund_server(calls)},
            extra_args={"await-initialize": None},
            **kwargs,
        )

    first = await run(REFUND, options(hooks=hook("defer"), session_store=store))
    assert first.terminal_reason == "tool_deferred"
    second = await resume(
        options(hooks=hook("allow"), session_store=store, resume=first.session_id)
    )
    assert second.result == "done: refunded order 7"
    assert calls == [{"orderId": "7"}]

    key: SessionKey = {
        "project_key": project_key_for_directory(cwd),
        "session_id": first.session_id,
    }
    written = await store.load(key)
    assert written is not None
    assert "last-prompt" in [e.get("type") for e in written]
    kept = kept_entries(cast(list[dict[str, Any]], written))
    assert "last-prompt" not in [e.get("type") for e in kept]
    without = InMemorySessionStore()
    await without.append(key, cast(list[SessionStoreEntry], kept))

    third = await run(
        "dex-script: say second turn",
        options(hooks=hook("allow"), session_store=without, resume=first.session_id),
    )
    assert third.result == "said: second turn"
    assert calls == [{"orderId": "7"}]
    body = api.requests[-1].body
    assert isinstance(body, dict) and isinstance(body["messages"], list)
    said = [
        (str(m["role"]), t)
        for m in body["messages"]
        if isinstance(m, dict) and m.get("role") in ("user", "assistant")
        for t in texts(m)
    ]
    order = [
        position(said, "user", REFUND),
        position(said, "user", CONTINUE),
        position(said, "assistant", "done: refunded order 7"),
        position(said, "user", "dex-script: say second turn"),
    ]
    assert order == sorted(order), said
    assert ("assistant", "No response requested.") not in said
    assert api.unserved == [] and proxy.attempts == []

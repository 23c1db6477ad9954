"""A custom tool whose handler is a plain `def` is refused when the agent is defined.

`@tool` accepts one, but the adapter awaits every handler: each call of it used
to fail long after the agent was defined, and the model read `object dict
can't be used in 'await' expression`. Handlers that are async in another
spelling (a bound `async def` method, a `functools.partial` of one, an object
whose `__call__` is `async def`, a `functools.wraps` wrapper that returns the
coroutine) stay accepted.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, tool

from dex_agents import InvalidOptionError
from dex_agents.claude import ClaudeAgentDefinition

Result = dict[str, Any]
FIX = "define it with `async def`"


def result(text: str) -> Result:
    return {"content": [{"type": "text", "text": text}]}


def as_tool(name: str, handler: Callable[[Result], Any]) -> SdkMcpTool[Any]:
    return tool(name, f"the {name} tool", {"orderId": str})(handler)


def sync_lookup(args: Result) -> Result:
    return result(f"order {args['orderId']}")


async def async_lookup(args: Result, *, prefix: str = "order") -> Result:
    return result(f"{prefix} {args['orderId']}")


class SyncCallable:
    def __call__(self, args: Result) -> Result:
        return result("sync")


class AsyncCallable:
    async def __call__(self, args: Result) -> Result:
        return result("async")


class Handlers:
    def lookup(self, args: Result) -> Result:
        return result("sync method")

    async def alookup(self, args: Result) -> Result:
        return result("async method")


async def _yielding(args: Result) -> Any:
    yield result("an async generator is not a handler")


def logged(handler: Callable[[Result], Awaitable[Result]]) -> Callable[[Result], Any]:
    """A sync decorator that returns the wrapped handler's coroutine."""

    @functools.wraps(handler)
    def wrapper(args: Result) -> Awaitable[Result]:
        return handler(args)

    return wrapper


SYNC: list[tuple[str, Callable[[Result], Any]]] = [
    ("plain_def", sync_lookup),
    ("lambda", lambda args: result("lambda")),
    ("sync_method", Handlers().lookup),
    ("sync_callable", SyncCallable()),
    ("partial_of_def", functools.partial(sync_lookup)),
    ("async_generator", _yielding),
]


@pytest.mark.parametrize(("name", "handler"), SYNC, ids=[n for n, _ in SYNC])
def test_a_sync_handler_is_refused_naming_the_tool_and_the_fix(
    name: str, handler: Callable[[Result], Any]
) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(), custom_tools=[as_tool(name, handler)]
        )
    message = str(caught.value)
    assert f"the handler of custom tool {name!r} is not async" in message, message
    assert FIX in message, message


def test_async_handlers_in_any_spelling_are_accepted_beside_a_refused_one() -> None:
    accepted = [
        as_tool("async_def", async_lookup),
        as_tool("async_method", Handlers().alookup),
        as_tool("async_callable", AsyncCallable()),
        as_tool("partial", functools.partial(async_lookup, prefix="parcel")),
        as_tool("wrapped", logged(async_lookup)),
    ]
    with pytest.raises(InvalidOptionError, match="'plain_def' is not async"):
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(),
            custom_tools=[*accepted, as_tool("plain_def", sync_lookup)],
        )
    agent = ClaudeAgentDefinition(options=ClaudeAgentOptions(), custom_tools=accepted)
    assert [t.name for t in agent.custom_tools] == [t.name for t in accepted]

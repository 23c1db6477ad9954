"""A custom tool's handler that returns no tool result: one check on both paths.

The session runs on the dev server, served by a worker in this process, with
the real bundled CLI against the scripted Messages API. Before the check, an
inline read that returned a plain str printed a traceback in the worker and the
model read `'str' object has no attribute 'get'`; text that was a datetime made
the model read `Invalid request parameters` inline, while a deferred call turned
it into a str; and an idempotent write whose handler forgot to return ran its
side effect on every one of its three attempts and ended `outcome_unknown`.

Now each is refused by one check, the same on both paths: the model reads what
the handler returned and the fix, the worker logs it, and a deferred call ends
`failed` after its one attempt (a retry would run the effect again and return
the same wrong thing).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from claude_agent_sdk import ToolAnnotations, tool
from temporalio.client import Client

from dex_agents import (
    AgentSessionOptions,
    ToolExecutionError,
    ToolPolicy,
    current_deferred_tool_execution,
)
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.claude._tools import checked_result, result_content
from dex_agents.session._records import DeferredToolExecution
from dex_agents.temporal import SessionClient
from dex_agents.temporal._snapshot import AgentSnapshot
from support.claude_harness import Hermetic
from support.session_harness import in_process_worker

pytestmark = pytest.mark.timeout(240)

STAMP = datetime(2025, 1, 2, 3, 4, 5)
SHAPE = "{'content': [{'type': 'text', 'text': '...'}]}"
TAIL = "(it ran, so what it did before returning may have taken effect)"
LOGGER = "dex_agents.claude._tools"
READ = ToolAnnotations(readOnlyHint=True)


@dataclass(kw_only=True)
class Agent:
    sessions: SessionClient
    runs: list[tuple[str, DeferredToolExecution | None]] = field(
        default_factory=lambda: []
    )

    def runs_of(self, name: str) -> list[DeferredToolExecution | None]:
        return [execution for tool, execution in self.runs if tool == name]


@asynccontextmanager
async def served_agent(
    client: Client, flow_type: str, hermetic: Hermetic
) -> AsyncIterator[Agent]:
    """Four tools whose handlers get their result wrong, on a worker in this process."""
    runs: list[tuple[str, DeferredToolExecution | None]] = []

    def ran(name: str) -> None:
        runs.append((name, current_deferred_tool_execution()))

    # `Any`: these handlers break the `@tool` contract on purpose.
    @tool("order_note", "Read an order's note", {"orderId": str}, annotations=READ)
    async def order_note(args: dict[str, Any]) -> Any:
        ran("order_note")
        return f"note of order {args['orderId']}"

    @tool("order_stamp", "When an order shipped", {"orderId": str}, annotations=READ)
    async def order_stamp(args: dict[str, Any]) -> Any:
        ran("order_stamp")
        return {"content": [{"type": "text", "text": STAMP}]}

    @tool("stamp_order", "Stamp an order as shipped", {"orderId": str})
    async def stamp_order(args: dict[str, Any]) -> Any:
        ran("stamp_order")
        return {"content": [{"type": "text", "text": STAMP}]}

    @tool("sync_price", "Sync a price to the shop", {"sku": str})
    async def sync_price(args: dict[str, Any]) -> Any:
        ran("sync_price")  # ... and forgets to return

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=hermetic.options(),
            custom_tools=[order_note, order_stamp, stamp_order, sync_price],
            tool_policies={
                "stamp_order": ToolPolicy(effect="idempotent_write"),
                "sync_price": ToolPolicy(effect="idempotent_write"),
            },
        ),
        flow_type,
        AgentSessionOptions(tool_attempts=3, retry_interval=timedelta(seconds=0.1)),
    )
    store_path = hermetic.base / "runtime.sqlite"
    async with in_process_worker(client, flow, store_path) as served:
        yield Agent(sessions=served.sessions, runs=runs)


async def started(agent: Agent, session_id: str, message: str) -> AgentSnapshot:
    await agent.sessions.start(session_id, initial_message=message)
    return await agent.sessions.wait_for_idle(session_id)


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the worker logged about tool results, as the messages it wrote."""
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info is not None]


async def test_an_inline_read_that_returns_a_str_tells_the_model_and_the_log(
    client: Client,
    flow_type: str,
    hermetic: Hermetic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    expected = (
        "the handler of tool 'order_note' returned str 'note of order 7', not a "
        f"tool result ({SHAPE}): return one {TAIL}"
    )
    async with served_agent(client, flow_type, hermetic) as agent:
        snap = await started(
            agent, "result-shape-str", 'dex-script: call order_note {"orderId": "7"}'
        )
    [turn] = snap.turns
    assert turn.status == "completed", turn.error
    assert turn.final_text == f"done: {expected}"
    assert turn.tool_calls == []  # it ran inline, once
    assert agent.runs_of("order_note") == [None]
    assert logged(caplog) == [expected]
    assert tracebacks(caplog) == []


async def test_text_that_is_not_a_str_is_refused_alike_inline_and_in_a_step(
    client: Client,
    flow_type: str,
    hermetic: Hermetic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)

    def expected(name: str) -> str:
        return (
            f"the handler of tool {name!r} returned a text block (`content[0]`) "
            f"whose `text` is datetime {STAMP!r}, not a str: make it a str "
            f"(str(value), or value.isoformat() for a datetime) {TAIL}"
        )

    async with served_agent(client, flow_type, hermetic) as agent:
        sid = "result-shape-datetime"
        inline = await started(
            agent, sid, 'dex-script: call order_stamp {"orderId": "7"}'
        )
        deferred = await agent.sessions.send_and_wait(
            sid, 'dex-script: call stamp_order {"orderId": "7"}'
        )
    first, second = inline.turns[0], deferred.turns[-1]
    assert first.final_text == f"done: {expected('order_stamp')}", first.error
    assert second.final_text == f"done: {expected('stamp_order')}", second.error
    [record] = second.tool_calls
    assert (record.status, record.attempts) == ("failed", 1)
    assert record.output == expected("stamp_order")
    assert len(agent.runs_of("order_stamp")) == 1
    assert len(agent.runs_of("stamp_order")) == 1
    assert logged(caplog) == [expected("order_stamp"), expected("stamp_order")]
    assert tracebacks(caplog) == []


async def test_an_idempotent_write_that_returns_nothing_fails_after_one_attempt(
    client: Client,
    flow_type: str,
    hermetic: Hermetic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    expected = (
        "the handler of tool 'sync_price' returned None, not a tool result "
        f"({SHAPE}): return one {TAIL}"
    )
    async with served_agent(client, flow_type, hermetic) as agent:
        snap = await started(
            agent, "result-shape-none", 'dex-script: call sync_price {"sku": "A-1"}'
        )
    [turn] = snap.turns
    assert turn.status == "completed", turn.error
    [record] = turn.tool_calls
    assert (record.tool_name, record.status, record.attempts) == (
        "sync_price",
        "failed",
        1,
    )
    assert record.output == expected
    assert turn.final_text == f"done: {expected}"
    # The side effect ran once, in the call's tool Step; no retry ran it again.
    [execution] = agent.runs_of("sync_price")
    assert execution is not None and execution.attempt == 1
    assert logged(caplog) == [expected]


# (what a handler returned, what the message says of it)
MALFORMED: list[tuple[str, object, str]] = [
    ("none", None, "returned None, not a tool result"),
    ("str", "hi", "returned str 'hi', not a tool result"),
    ("list", [{"type": "text", "text": "hi"}], "returned list [{"),
    ("none_content", {"content": None}, "whose `content` is NoneType None, not a list"),
    ("str_content", {"content": "hi"}, "whose `content` is str 'hi', not a list"),
    ("int_block", {"content": [5]}, "`content[0]` = int 5, not a content block"),
    ("untyped", {"content": [{"text": "hi"}]}, "`content[0]` = dict {'text': 'hi'}"),
    (
        "int_text",
        {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": 7}]},
        "a text block (`content[1]`) whose `text` is int 7, not a str",
    ),
    (
        "bytes_image",
        {"content": [{"type": "image", "data": b"\x89PNG", "mimeType": "image/png"}]},
        "an image block (`content[0]`) whose `data` is bytes b'\\x89PNG', not a "
        "str: give the image as base64 text",
    ),
    (
        "no_mime",
        {"content": [{"type": "image", "data": "iVBORw=="}]},
        "whose `mimeType` is NoneType None",
    ),
    (
        "binary_resource",
        {"content": [{"type": "resource", "resource": {"text": 3}}]},
        "a resource block (`content[0]`) whose `resource` is dict {'text': 3}",
    ),
]


@pytest.mark.parametrize(
    ("returned", "says"),
    [(r, s) for _, r, s in MALFORMED],
    ids=[n for n, _, _ in MALFORMED],
)
def test_each_malformed_result_is_named_with_its_fix(
    returned: object, says: str
) -> None:
    with pytest.raises(ToolExecutionError) as caught:
        checked_result("lookup", returned)
    message = str(caught.value)
    assert message.startswith("the handler of tool 'lookup' returned "), message
    assert says in message, message
    assert message.endswith(TAIL), message


def test_results_the_sdk_maps_pass_as_it_maps_them() -> None:
    returned = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
            {"type": "resource_link", "name": "spec", "uri": "file:///spec.md"},
            {"type": "resource", "resource": {"uri": "x", "text": "inline"}},
            {"type": "audio", "data": "AA=="},  # dropped, as the SDK drops it
        ],
        "is_error": False,
    }
    assert checked_result("lookup", returned) is returned
    assert [b["type"] for b in result_content(returned)] == [
        "text",
        "image",
        "text",
        "text",
    ]
    with pytest.raises(ToolExecutionError, match="whose `text` is int 1"):
        checked_result(
            "lookup", {"content": [*returned["content"], {"type": "text", "text": 1}]}
        )


def test_a_result_without_content_is_empty_as_the_sdk_reads_it() -> None:
    """The SDK's own server reads a missing `content` as no content: so do we."""
    assert checked_result("lookup", {"is_error": False}) == {"is_error": False}

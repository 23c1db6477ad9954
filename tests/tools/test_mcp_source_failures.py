"""How `MCPServerToolSource` reports failures, listings and large results."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from mcp import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    CallToolResult,
    TextContent,
)
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter

from dex_agents import SessionError, ToolExecutionError
from dex_agents.connectors import MCPServerToolSource
from dex_agents.connectors._mcp_source import _MAX_OUTPUT_BYTES, _result_text
from dex_agents.session import ToolPolicy
from dex_agents.session._policy import ToolEffect
from dex_agents.session._tool_sources import SourceCallRefused, ToolSourceContext
from dex_agents.testing import Ledger
from support.mcp_source_rig import execution, stdio_server, tool_call
from support.tools_harness import (
    IDEMPOTENT,
    MCP_CONTEXT,
    READ,
    WRITE,
    http_ledger_source,
)


def assert_encodes_for_temporal(error: BaseException) -> Failure:
    """`error` has a finite cause chain and Temporal's default converter encodes it."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None:
        assert id(cause) not in seen, f"{cause!r} is its own cause"
        seen.add(id(cause))
        cause = cause.__cause__
    failure = Failure()
    converter = DataConverter.default
    converter.failure_converter.to_failure(error, converter.payload_converter, failure)
    return failure


async def test_a_timed_out_read_raises_an_error_temporal_can_record(
    tmp_path: Path,
) -> None:
    source = MCPServerToolSource(
        stdio_server(tmp_path / "ledger.jsonl"),
        source_name="ledger",
        call_timeout=timedelta(seconds=1),
    )
    with pytest.raises(Exception) as e:
        await source.execute_deferred_tool_call(
            tool_call("hang", {"account": "a"}, READ), execution()
        )
    assert not isinstance(e.value, SessionError | ToolExecutionError)
    assert e.value.__cause__ is not e.value
    failure = assert_encodes_for_temporal(e.value)
    assert failure.message == str(e.value)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_idempotent_write_whose_server_dies_retries_with_the_real_error(
    tmp_path: Path, transport: str
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    call = tool_call("append_and_crash", {"account": "a"}, IDEMPOTENT)
    if transport == "stdio":
        source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
        with pytest.raises(Exception) as e:
            await source.execute_deferred_tool_call(call, execution())
    else:
        async with http_ledger_source(ledger) as source:
            with pytest.raises(Exception) as e:
                await source.execute_deferred_tool_call(call, execution())
    # Propagated for the Step to retry: not a record, not "unknown".
    assert not isinstance(e.value, SessionError | ToolExecutionError)
    # The transport's own error, not the task group that carried it.
    assert not isinstance(e.value, BaseExceptionGroup)
    failure = assert_encodes_for_temporal(e.value)
    assert "TaskGroup" not in failure.message
    assert ledger.count("mcp_entry") == 1


async def test_a_write_whose_http_server_dies_mid_call_has_an_unknown_outcome(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with http_ledger_source(ledger) as source:
        with pytest.raises(SessionError) as e:
            await source.execute_deferred_tool_call(
                tool_call("append_and_crash", {"account": "a"}, WRITE), execution()
            )
    assert e.value.retryable is False
    message = str(e.value)
    assert message.startswith("append_and_crash outcome unknown: MCP server 'ledger'")
    # The record names the transport's error, not the task group around it.
    assert "Server disconnected without sending a response" in message
    assert "TaskGroup" not in message
    assert_encodes_for_temporal(e.value)
    assert ledger.count("mcp_entry") == 1


async def test_invalid_params_leaves_a_write_unknown_and_fails_a_read(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
    # The handler wrote, then answered INVALID_PARAMS: not proof it did not run.
    with pytest.raises(SessionError) as unknown:
        await source.execute_deferred_tool_call(
            tool_call("append_then_reject", {"account": "a"}, WRITE), execution()
        )
    assert unknown.value.retryable is False
    assert "append_then_reject outcome unknown" in str(unknown.value)
    assert "no such account: a" in str(unknown.value)
    assert_encodes_for_temporal(unknown.value)
    # A read (or an idempotent write) fails as a record the model reads.
    for policy in (READ, IDEMPOTENT):
        with pytest.raises(ToolExecutionError) as failed:
            await source.execute_deferred_tool_call(
                tool_call("append_then_reject", {"account": "b"}, policy),
                execution(),
            )
        assert "rejected its parameters: no such account: b" in str(failed.value)
    assert ledger.count("mcp_entry") == 3


@pytest.mark.parametrize(
    ("code", "effect", "expected"),
    [
        (METHOD_NOT_FOUND, "non_idempotent_write", ToolExecutionError),
        (INVALID_REQUEST, "unclassified", ToolExecutionError),
        (INVALID_PARAMS, "non_idempotent_write", SessionError),
        (INVALID_PARAMS, "unclassified", SessionError),
        (INVALID_PARAMS, "read", ToolExecutionError),
        (INTERNAL_ERROR, "non_idempotent_write", SessionError),
        (INTERNAL_ERROR, "idempotent_write", MCPError),
    ],
)
def test_only_a_refused_request_proves_a_write_did_not_run(
    code: int, effect: ToolEffect, expected: type[Exception]
) -> None:
    source = MCPServerToolSource(["unused"], source_name="x")
    error = MCPError(code=code, message="refused")
    call = tool_call("append_entry", {}, ToolPolicy(effect=effect))
    failure = source._call_failure(  # pyright: ignore[reportPrivateUsage]
        call, error, effect in ("non_idempotent_write", "unclassified")
    )
    assert type(failure) is expected
    if expected is ToolExecutionError and code != INVALID_PARAMS:
        assert "append_entry did not run" in str(failure)


async def test_a_later_listing_does_not_withdraw_a_tool_an_earlier_one_offered(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    source = MCPServerToolSource(stdio_server(ledger), source_name="ledger")
    first = [t.name for t in await source.list_tools(MCP_CONTEXT)]
    assert "append_entry" in first
    # Another session's attempt on this worker lists a server that changed.
    Path(f"{ledger}.hidden").write_text("append_entry\n")
    other = ToolSourceContext(session_id="session-2", turn_id="turn-1", attempt=1)
    second = [t.name for t in await source.list_tools(other)]
    assert "append_entry" not in second and "read_balance" in second
    # The first session's attempt offered it, so its call is still built.
    built = await source.build_call("append_entry", {"account": "a", "amount": 5})
    assert built.policy == WRITE
    with pytest.raises(SourceCallRefused, match="does not fit its schema"):
        await source.build_call("append_entry", {"account": "a"})
    # A tool no listing ever offered is still refused.
    with pytest.raises(SourceCallRefused, match="does not offer `nope`"):
        await source.build_call("nope", {})


def test_a_huge_result_is_cut_with_a_note() -> None:
    small = CallToolResult(content=[TextContent(type="text", text="é" * 1000)])
    assert _result_text(small) == "é" * 1000
    exact = CallToolResult(
        content=[TextContent(type="text", text="x" * _MAX_OUTPUT_BYTES)]
    )
    assert _result_text(exact) == "x" * _MAX_OUTPUT_BYTES
    # 3 MB of two-byte characters, past Temporal's 2 MB payload limit.
    huge = CallToolResult(content=[TextContent(type="text", text="é" * 1_500_000)])
    text = _result_text(huge)
    kept, note = text.rsplit("\n", 1)
    assert kept == "é" * (_MAX_OUTPUT_BYTES // 2)
    assert note == f"[output truncated: {3_000_000 - _MAX_OUTPUT_BYTES} bytes more]"
    assert len(text.encode()) < _MAX_OUTPUT_BYTES + 100
    # A cut never splits a character: an odd limit drops the half one.
    odd = CallToolResult(content=[TextContent(type="text", text="a" + "é" * 200_000)])
    kept, note = _result_text(odd).rsplit("\n", 1)
    assert kept == "a" + "é" * ((_MAX_OUTPUT_BYTES - 1) // 2)
    assert note == f"[output truncated: {400_001 - len(kept.encode())} bytes more]"
    # A lone surrogate (valid in JSON text) does not break the cut.
    surrogate = CallToolResult(
        content=[TextContent(type="text", text="\ud800" + "x" * 300_000)]
    )
    assert _result_text(surrogate).endswith(" bytes more]")
    # Structured content is cut the same way.
    structured = CallToolResult(content=[], structured_content={"v": "y" * 300_000})
    assert _result_text(structured).endswith(" bytes more]")

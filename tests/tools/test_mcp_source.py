"""`MCPServerToolSource` against a real MCP server, over stdio and streamable HTTP."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents import SessionError, ToolExecutionError, UserError
from dex_agents.connectors import (
    MCPServerToolSource,
)
from dex_agents.session import ToolOutcome, ToolPolicy
from dex_agents.session._tool_sources import (
    SourceCallRefused,
    ToolStepOptions,
)
from dex_agents.testing import Ledger
from support.mcp_source_rig import (
    TOKEN,
    execution,
    stdio_server,
    tool_call,
)
from support.tools_harness import MCP_CONTEXT, READ, WRITE, http_ledger_source


async def test_stdio_listing_offers_the_servers_tools(tmp_path: Path) -> None:
    source = MCPServerToolSource(
        stdio_server(tmp_path / "ledger.jsonl"), source_name="ledger"
    )
    tools = {t.name: t for t in await source.list_tools(MCP_CONTEXT)}
    assert set(tools) == {
        "read_balance",
        "set_limit",
        "append_entry",
        "broken",
        "chart",
        "append_and_crash",
        "append_then_reject",
        "hang",
    }
    entry = tools["append_entry"]
    assert entry.description == "Append an entry to an account"
    assert entry.input_schema["required"] == ["account", "amount"]
    # Dynamic: the runner checks each listing, nothing is declared up front.
    assert source.declared_tool_names == ()


async def test_streamable_http_lists_and_calls_with_the_configured_headers(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with http_ledger_source(ledger) as source:
        names = [t.name for t in await source.list_tools(MCP_CONTEXT)]
        assert "read_balance" in names
        built = await source.build_call("read_balance", {"account": "a"})
        outcome = await source.execute_deferred_tool_call(
            tool_call("read_balance", built.arguments, built.policy), execution()
        )
    assert outcome == ToolOutcome(output="balance of a: 0")
    (read,) = ledger.entries("mcp_read")
    assert read["authorization"] == TOKEN


async def test_annotations_classify_the_effect(tmp_path: Path) -> None:
    source = MCPServerToolSource(
        stdio_server(tmp_path / "ledger.jsonl"), source_name="ledger"
    )
    await source.list_tools(MCP_CONTEXT)
    read = await source.build_call("read_balance", {"account": "a"})
    assert read.policy == ToolPolicy(effect="read")
    assert not read.policy.needs_approval
    # idempotentHint wins over destructiveHint: a retry cannot write twice.
    limit = await source.build_call("set_limit", {"account": "a", "limit": 3})
    assert limit.policy.effect == "idempotent_write"
    assert not limit.policy.needs_approval
    # Neither read-only nor idempotent: at most once, after approval, even
    # though destructiveHint is false.
    entry = await source.build_call("append_entry", {"account": "a", "amount": 5})
    assert entry.policy.effect == "non_idempotent_write"
    assert entry.policy.needs_approval
    assert "ledger" in entry.reason and "append_entry" in entry.reason
    # No annotations at all: the same, a write that waits for approval.
    crash = await source.build_call("append_and_crash", {"account": "a"})
    assert crash.policy.effect == "non_idempotent_write"
    assert entry.metadata == {"effect_from": "annotations"}


async def test_policies_and_declared_names_override_the_server(
    tmp_path: Path,
) -> None:
    source = MCPServerToolSource(
        stdio_server(tmp_path / "ledger.jsonl"),
        source_name="ledger",
        declared_tool_names=["read_balance", "append_entry"],
        tool_policies={"append_entry": ToolPolicy(effect="idempotent_write")},
    )
    assert source.declared_tool_names == ("read_balance", "append_entry")
    listed = [t.name for t in await source.list_tools(MCP_CONTEXT)]
    assert listed == ["read_balance", "append_entry"]
    entry = await source.build_call("append_entry", {"account": "a", "amount": 5})
    assert entry.policy == ToolPolicy(effect="idempotent_write")
    assert entry.metadata == {"effect_from": "policy"}
    with pytest.raises(SourceCallRefused, match="does not offer `set_limit`"):
        await source.build_call("set_limit", {"account": "a", "limit": 3})


def test_a_policy_for_an_undeclared_tool_is_refused() -> None:
    with pytest.raises(UserError, match="not in `declared_tool_names`"):
        MCPServerToolSource(
            ["unused"],
            source_name="ledger",
            declared_tool_names=["read_balance"],
            tool_policies={"append_entry": ToolPolicy(effect="read")},
        )


@pytest.mark.parametrize(
    ("server", "options", "message"),
    [
        ("server.py", {}, "neither an http"),
        ([], {}, "non-empty list"),
        (["python", ""], {}, "non-empty list"),
        (Path("server.py"), {}, r"str\(path\)"),
        ("https://example.com/mcp", {"env": {"A": "1"}}, "`env=` and `cwd=`"),
        (["python", "server.py"], {"headers": {"A": "1"}}, "`headers=` are sent"),
    ],
)
def test_a_server_that_is_neither_a_url_nor_a_command_is_refused(
    server: object, options: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        MCPServerToolSource(server, source_name="x", **options)  # pyright: ignore[reportArgumentType]


def test_a_server_is_a_url_of_any_case_or_a_command_line_with_paths() -> None:
    # Constructing a source connects to nothing; these are only accepted.
    MCPServerToolSource("HTTPS://example.com/mcp", source_name="x", env={})
    MCPServerToolSource(("python", Path("server.py")), source_name="x", headers={})


async def test_bad_arguments_are_refused_before_the_server(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
    with pytest.raises(SourceCallRefused, match="does not offer `append_entry`"):
        # Nothing listed yet: build_call knows only listed tools.
        await source.build_call("append_entry", {"account": "a", "amount": 5})
    await source.list_tools(MCP_CONTEXT)
    with pytest.raises(SourceCallRefused) as missing:
        await source.build_call("append_entry", {"account": "a"})
    assert str(missing.value) == (
        "the input of `append_entry` does not fit its schema: "
        "'amount' is a required property"
    )
    with pytest.raises(SourceCallRefused) as wrong_type:
        await source.build_call("append_entry", {"account": "a", "amount": "five"})
    assert "'five' is not of type 'integer' (at `amount`)" in str(wrong_type.value)
    assert ledger.entries() == []


async def test_an_error_result_is_a_failed_record(tmp_path: Path) -> None:
    source = MCPServerToolSource(
        stdio_server(tmp_path / "ledger.jsonl"), source_name="ledger"
    )
    with pytest.raises(ToolExecutionError) as e:
        await source.execute_deferred_tool_call(
            tool_call("broken", {"reason": "disk full"}, READ), execution()
        )
    # The model reads the server's own error text.
    assert str(e.value) == "Error executing tool broken: broken: disk full"


async def test_text_content_is_the_output_and_images_are_named(
    tmp_path: Path,
) -> None:
    source = MCPServerToolSource(
        stdio_server(tmp_path / "ledger.jsonl"), source_name="ledger"
    )
    outcome = await source.execute_deferred_tool_call(
        tool_call("chart", {"account": "a"}, READ), execution()
    )
    # The record keeps text only: the image is named where it was, not passed on.
    assert outcome == ToolOutcome(
        output="chart of a:\n[image image/png omitted]\n(rising)"
    )


async def test_every_call_carries_its_idempotency_key_in_meta(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
    call = tool_call(
        "set_limit", {"account": "a", "limit": 3}, ToolPolicy(effect="idempotent_write")
    )
    for attempt in (1, 2):
        outcome = await source.execute_deferred_tool_call(
            call, execution(attempt=attempt)
        )
        assert outcome == ToolOutcome(output="limit of a: 3")
    assert [
        (e["idempotency_key"], e["step_execution_id"], e["attempt"])
        for e in ledger.entries("mcp_set_limit")
    ] == [
        ("session-1/turn-1/call-1", "step-call-1", 1),
        ("session-1/turn-1/call-1", "step-call-1", 2),
    ]


async def test_an_unreachable_server_fails_a_write_as_not_run(
    tmp_path: Path,
) -> None:
    source = MCPServerToolSource(
        [str(tmp_path / "no-such-server")],
        source_name="ledger",
    )
    arguments = {"account": "a", "amount": 5}
    # No connection, so tools/call was never sent: the write certainly did not run.
    with pytest.raises(ToolExecutionError, match="append_entry did not run"):
        await source.execute_deferred_tool_call(
            tool_call("append_entry", arguments, WRITE), execution()
        )
    # A read's Step retries instead.
    with pytest.raises(OSError):
        await source.execute_deferred_tool_call(
            tool_call("read_balance", {"account": "a"}, READ), execution()
        )
    with pytest.raises(OSError):
        await source.list_tools(MCP_CONTEXT)


async def test_a_write_whose_server_dies_mid_call_has_an_unknown_outcome(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
    with pytest.raises(SessionError, match="append_and_crash outcome unknown") as e:
        await source.execute_deferred_tool_call(
            tool_call("append_and_crash", {"account": "a"}, WRITE), execution()
        )
    assert e.value.retryable is False
    # It did write: only the provider could have told.
    assert ledger.count("mcp_entry") == 1


async def test_a_timed_out_write_has_an_unknown_outcome_and_a_read_retries(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(
        stdio_server(ledger.path),
        source_name="ledger",
        call_timeout=timedelta(seconds=1),
    )
    with pytest.raises(SessionError, match="hang outcome unknown") as e:
        await source.execute_deferred_tool_call(
            tool_call("hang", {"account": "a"}, WRITE), execution()
        )
    assert e.value.retryable is False
    with pytest.raises(Exception) as read_error:
        await source.execute_deferred_tool_call(
            tool_call("hang", {"account": "b"}, READ), execution()
        )
    # Not a record and not "unknown": the error fails the attempt, so it retries.
    assert not isinstance(read_error.value, SessionError | ToolExecutionError)
    assert [e["account"] for e in ledger.entries("mcp_hang")] == ["a", "b"]


def test_step_options_are_the_configured_ones() -> None:
    default = ToolStepOptions(timeout=timedelta(seconds=30), attempts=5)
    slow = ToolStepOptions(timeout=timedelta(minutes=5))
    source = MCPServerToolSource(
        ["unused"],
        source_name="ledger",
        step_options=default,
        tool_step_options={"hang": slow},
    )
    assert source.tool_call_step_options("read_balance") == default
    assert source.tool_call_step_options("hang") == slow
    plain = MCPServerToolSource(["unused"], source_name="x")
    assert plain.tool_call_step_options("read_balance") == ToolStepOptions()

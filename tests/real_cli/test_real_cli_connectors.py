"""Connector tools against the real bundled Claude Code CLI and the scripted Messages API.

The session engine is played by `claude_harness.SessionDriver`; the `hermetic`
fixture fails the test if the CLI is missing while `DEX_AGENTS_REAL_CLI_REQUIRED=1`,
asked the mock for anything it does not serve, or tried the refusing proxy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import JsonValue

from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.claude._sources import source_one_reply_text
from dex_agents.connectors import ConnectorToolSource
from dex_agents.session import ToolCall, ToolCallsRequested, ToolPolicy
from dex_agents.testing import Ledger
from dex_agents.testing._fake_ledger_connector import fake_ledger_connector_tools
from support.claude_harness import Approval, Hermetic, SessionDriver


def _blocks(message: JsonValue) -> list[dict[str, Any]]:
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def _messages(body: JsonValue) -> list[JsonValue]:
    """The `messages` of one model request."""
    if not isinstance(body, dict):
        return []
    messages = body.get("messages")
    return list(messages) if isinstance(messages, list) else []


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [])


async def test_two_connector_writes_in_one_reply_under_dont_ask(
    hermetic: Hermetic, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=hermetic.options(permission_mode="dontAsk"),
            tool_sources=[
                ConnectorToolSource(fake_ledger_connector_tools(str(ledger.path)))
            ],
        )
    )
    driver = SessionDriver(runner)
    approved: list[tuple[str, int]] = []

    def approve(call: ToolCall) -> Approval:
        # What the provider had seen when the person approved this call.
        approved.append((str(call.arguments["account"]), ledger.count("ledger_entry")))
        return True

    result = await driver.turn(
        'dex-script: call transfer {"account": "a", "amount": 1} '
        '&& call transfer {"account": "b", "amount": 2}',
        decide=approve,
    )
    assert result.text == "done: transferred 1 to a; transferred 2 to b"
    # The first write deferred alone and ran after its approval; the second ran
    # only once the model called it again, by itself, in the resumed segment.
    first = result.segments[0]
    assert isinstance(first, ToolCallsRequested)
    assert [c.arguments for c in first.calls] == [{"account": "a", "amount": 1}]
    assert [c.arguments for c in result.calls] == [
        {"account": "a", "amount": 1},
        {"account": "b", "amount": 2},
    ]
    assert all(c.metadata["kind"] == "source" for c in result.calls)
    assert [c.policy for c in result.calls] == [
        ToolPolicy(effect="non_idempotent_write", requires_approval=True)
    ] * 2
    assert approved == [("a", 0), ("b", 1)]
    assert [(e["account"], e["amount"]) for e in ledger.entries("ledger_entry")] == [
        ("a", 1),
        ("b", 2),
    ]
    assert len(result.segments) == 3
    # The second write of the first reply was denied inside the turn.
    replies = [_messages(r.body) for r in hermetic.api.requests]
    denied = [
        _text(b)
        for m in replies[1]
        if isinstance(m, dict) and m.get("role") == "user"
        for b in _blocks(m)
        if b.get("type") == "tool_result" and "did not run" in _text(b)
    ]
    assert len(denied) == 1
    assert source_one_reply_text("transfer") in denied[0]
    # No request the mock does not serve, no proxy attempt (the fixture checks
    # again at teardown).
    assert hermetic.api.unserved == []
    assert hermetic.proxy.attempts == []

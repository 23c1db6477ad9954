"""A model API that cannot be reached shows as `model_retry` events, not as a slow turn.

Claude Code retries a failed Messages API request itself, with backoff, for
minutes before the segment fails. The session says so as it happens: each
`api_retry` notice of the real CLI becomes a `model_retry` event that clients
show (`dex-agents events`, chat, demo).
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from dex_agents.cli._render import event_line
from dex_agents.session._events import ModelRetryEvent
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig
from support.cli_harness import closed_port


async def test_an_unreachable_model_api_is_reported_as_model_retry_events(
    claude_rig: ClaudeRig, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-model-retry"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="dex-script: say hi")
        async with asyncio.timeout(120):
            while not (
                retries := [
                    e for e in await sessions.events(sid) if e.type == "model_retry"
                ]
            ):
                await asyncio.sleep(0.1)
        assert await sessions.cancel_turn(sid, reason="no API")
        snapshot = await sessions.wait_for_idle(sid)
    await store.close()

    first = retries[0].payload()
    assert isinstance(first, ModelRetryEvent)
    assert (first.attempt, first.error_status, first.error) == (1, None, "unknown")
    assert first.max_retries >= 1 and first.retry_in_ms > 0
    assert first.text().startswith(
        "the model API could not be reached; asking again in "
    )
    assert first.text().endswith(f"s (retry 1 of {first.max_retries})")
    assert "↻ the model API could not be reached" in event_line(retries[0]).plain
    assert snapshot.turns[-1].status == "cancelled"
    assert claude_rig.api.requests == []  # the scripted API was never asked


async def test_claude_code_max_retries_makes_an_unreachable_api_fail_the_turn_soon(
    claude_rig: ClaudeRig, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README Limits: `CLAUDE_CODE_MAX_RETRIES` in the worker's environment bounds the wait."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-max-retries"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="dex-script: say hi")
        snapshot = await sessions.wait_for_idle(sid)
        events = await sessions.events(sid)
    await store.close()

    turn = snapshot.turns[-1]
    # Each of the turn's three attempts: one retry notice, then the CLI gives up.
    assert [e.type for e in events] == [
        "turn_started",
        "model_retry",
        "segment_rerun",
        "model_retry",
        "segment_rerun",
        "model_retry",
        "turn_failed",
    ]
    retries = [e.payload() for e in events if e.type == "model_retry"]
    assert all(isinstance(r, ModelRetryEvent) and r.max_retries == 1 for r in retries)
    assert (turn.status, turn.reruns) == ("failed", 2)
    assert turn.error is not None and "API Error: Connection refused" in turn.error
    assert claude_rig.api.requests == []

"""A session served with a runtime store that is not its own: one clear error, no retries.

A session's transcript and blobs live in the runtime store its earlier turns
used. A worker or client pointed at another store (a relative SQLite path run
from another directory, a fresh database) cannot find them: the turn fails at
once with a message that says so and how to fix it, instead of a bare
`KeyError` retried until the attempts run out, and a snapshot says the same.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import UserError
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config

NOT_HERE = (
    "which this runtime store does not have: its earlier turns ran with another store"
)


async def test_a_worker_on_another_store_fails_the_turn_once_and_says_why(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    sid = f"other-store-{uuid.uuid4().hex[:8]}"
    first = SQLiteRuntimeStore(tmp_path / "first.sqlite")
    async with create_worker(client, [flow], store=first):
        sessions = SessionClient(client, flow, first)
        await sessions.start(sid, initial_message="say one")
        done = await sessions.wait_for_idle(sid)
        assert done.turns[-1].final_text == "said: one"
    head = done.transcript_head
    assert head is not None
    await first.close()

    other = SQLiteRuntimeStore(tmp_path / "other.sqlite")
    sessions = SessionClient(client, flow, other)
    async with create_worker(client, [flow], store=other):
        await sessions.send_user_message(sid, "recall")
        idle = await sessions.wait_for_idle(sid, turns=0)
        with pytest.raises(UserError) as unreadable:
            await sessions.snapshot(sid)
    assert idle.status == "idle"
    events = [e for e in await sessions.events(sid) if e.type == "turn_failed"]
    (failed,) = events
    error = str(failed.data["error"])
    assert f"session {sid!r} names transcript segment {head!r}, {NOT_HERE}" in error
    assert "start a new session with another ID" in error
    # Not retried: another attempt could not find it either.
    reruns = [e for e in await sessions.events(sid) if e.type == "segment_rerun"]
    assert reruns == []
    assert str(unreadable.value) == (
        f"session {sid!r} names transcript segment {head!r}, {NOT_HERE}. Run every "
        "client and worker of the session with that store (the same SQLite file or "
        "PostgreSQL database), or start a new session with another ID"
    )
    await other.close()

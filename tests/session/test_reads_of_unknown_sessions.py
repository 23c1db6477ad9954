"""`events`, `history` and `follow` of a session nobody has raise `UnknownSessionError`.

They read the runtime store only, so a mistyped ID returned no events, no
turns, or followed forever, while the CLI and the web app said "unknown
session". A session Temporal knows but no worker has taken yet (nothing in
the store) still reads as empty.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import UnknownSessionError
from dex_agents.session._state import SessionInput
from support.session_harness import ledger_session


async def test_reads_of_an_unknown_session_raise(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    _, flow, store, sessions = ledger_session(client, tmp_path, flow_type)
    typo = f"typo-{uuid.uuid4().hex[:8]}"
    try:
        with pytest.raises(UnknownSessionError) as caught:
            await sessions.events(typo)
        assert caught.value.session_id == typo
        assert f"unknown session {typo!r}" in str(caught.value)
        with pytest.raises(UnknownSessionError):
            await sessions.events(typo, after=5)
        with pytest.raises(UnknownSessionError):
            [turn async for turn in sessions.history(typo)]
        with pytest.raises(UnknownSessionError):
            # It raised before this: it did not poll for events that never come.
            async with asyncio.timeout(10):
                [event async for event in sessions.follow(typo)]

        # A session Temporal has that no worker took yet: empty, not unknown.
        sid = f"untaken-{uuid.uuid4().hex[:8]}"
        await client.start_workflow(
            flow.flow_type, SessionInput(), id=sid, task_queue=flow.task_queue
        )
        assert await sessions.events(sid) == []
        assert [turn async for turn in sessions.history(sid)] == []
        follow = sessions.follow(sid)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await anext(follow)
        await client.get_workflow_handle(sid).terminate("test over")
    finally:
        await store.close()

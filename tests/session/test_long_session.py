"""A long session continues as new, keeps every turn, and history per turn stays flat."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.temporal import create_worker
from support.session_harness import ledger_session


@pytest.mark.timeout(600)
async def test_300_turns_continue_as_new_and_history_per_turn_is_flat(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config, flow, store, sessions = ledger_session(
        client, tmp_path, flow_type, continue_as_new_after_events=600
    )
    sid = "long-session"
    handle = client.get_workflow_handle(sid)
    growth: list[tuple[int, int]] = []  # (turn, bytes added) within one run
    runs: set[str] = set()
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid)
        before = await handle.describe()
        for turn in range(1, 301):
            await sessions.send_user_message(sid, f"say turn {turn:03d}")
            await sessions.wait_for_idle(sid)
            after = await handle.describe()
            runs.add(after.run_id or "")
            if after.run_id == before.run_id:
                info = after.raw_description.workflow_execution_info
                prev = before.raw_description.workflow_execution_info
                growth.append((turn, info.history_size_bytes - prev.history_size_bytes))
            before = after
        snap = await sessions.snapshot(sid, turns=300)
        history = [t async for t in sessions.history(sid, page_size=64)]
    await store.close()
    assert len(runs) >= 2, "the session never continued as new"
    assert [t.final_text for t in reversed(history)] == [
        f"said: turn {n:03d}" for n in range(1, 301)
    ]
    assert [t.final_text for t in snap.turns] == [
        f"said: turn {n:03d}" for n in range(1, 301)
    ]
    assert snap.turn_count == 300
    assert len([m for m in snap.messages if m.role == "user"]) == 300
    early = statistics.median(b for t, b in growth if t <= 30)
    late = statistics.median(b for t, b in growth if t > 270)
    assert late <= early * 1.1, f"history per turn grew: {early} B early, {late} B late"

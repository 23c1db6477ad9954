"""The Claude agent under worker crashes: real worker processes, the real CLI, counted refunds."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient
from dex_agents.testing import WorkerProcess
from support.claude_rig import ClaudeRig
from support.processes import cli_processes_in

pytestmark = pytest.mark.timeout(240)


async def test_turn_deferred_on_one_worker_resumes_on_another_after_sigkill(
    claude_rig: ClaudeRig, client: Client, example_worker: WorkerProcess
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "claude-crash-waiting"
    await sessions.start(
        sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
    )
    (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
    first_pid = example_worker.process.pid if example_worker.process else None
    example_worker.kill()
    example_worker.start()
    assert (
        example_worker.process is not None and example_worker.process.pid != first_pid
    )
    assert claude_rig.example.refunds() == []
    assert await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    snap = await sessions.wait_for_idle(sid)
    assert snap.turns[0].status == "completed", snap.turns[0].error
    assert "refunded order 7" in snap.turns[0].final_text
    assert claude_rig.example.refunds() == [
        ("7", f"{sid}/turn-1/{interrupt.tool_call_id}")
    ]
    await store.close()


async def test_sigkill_during_run_model_reruns_the_segment_and_kills_the_cli(
    claude_rig: ClaudeRig, client: Client, example_worker: WorkerProcess
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "claude-crash-model"
    cwd = (claude_rig.tmp / "agents" / sid).resolve()
    await sessions.start(
        sid, initial_message="dex-script: say after the crash ;; pause model"
    )
    await asyncio.wait_for(claude_rig.api.wait_paused("model"), 60)
    assert cli_processes_in(cwd), "the CLI of the segment should be running"
    example_worker.kill()
    async with asyncio.timeout(10):
        while cli_processes_in(cwd):
            await asyncio.sleep(0.05)
    example_worker.start()
    claude_rig.api.open_gate("model")
    snap = await sessions.wait_for_idle(sid)
    assert snap.turns[0].status == "completed", snap.turns[0].error
    assert snap.turns[0].final_text == "said: after the crash"
    assert snap.transcript_head is not None and snap.transcript_head.endswith(
        "attempt-2"
    )
    await store.close()

"""`cancel_turn` through the real bundled CLI: the CLI is killed and the session goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ToolAnnotations, tool
from temporalio.client import Client

from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import WorkerProcess
from support.claude_rig import ClaudeRig
from support.processes import cli_processes_in

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc"),
]


async def _gone(cwd: Path) -> list[int]:
    async with asyncio.timeout(20):
        while left := cli_processes_in(cwd):
            await asyncio.sleep(0.05)
    return left


def _cwd(rig: ClaudeRig, sid: str) -> Path:
    return (rig.tmp / "agents" / sid).resolve()


async def test_a_cancel_during_a_long_model_call_kills_the_cli(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-cancel-model-call"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="dex-script: say never ;; pause slow")
        await claude_rig.api.wait_paused("slow", timeout=60)
        assert cli_processes_in(_cwd(claude_rig, sid))

        assert await sessions.cancel_turn(sid, reason="taking too long")

        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "cancelled"
        assert await _gone(_cwd(claude_rig, sid)) == []
        claude_rig.api.open_gate("slow")  # the held request ends unanswered
        snap = await sessions.send_and_wait(sid, "dex-script: say back again")
        assert snap.turns[-1].status == "completed", snap.turns[-1].error
        assert snap.turns[-1].final_text == "said: back again"
    await store.close()


async def test_a_cancel_during_an_inline_read_kills_the_cli(
    claude_rig: ClaudeRig, client: Client
) -> None:
    reached, gate = claude_rig.tmp / "read.reached", claude_rig.tmp / "read.gate"
    finished: list[str] = []

    @tool(
        "slow_lookup",
        "Look up an order, slowly",
        {"orderId": str},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def slow_lookup(args: dict[str, Any]) -> dict[str, Any]:
        reached.write_text("")  # the read runs inline, inside the segment
        while not gate.exists():
            await asyncio.sleep(0.02)
        finished.append(str(args["orderId"]))
        return {"content": [{"type": "text", "text": "order 7: fine"}]}

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=claude_rig.example.options, custom_tools=[slow_lookup]
        ),
        "SlowReadAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-cancel-inline-read"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call slow_lookup {"orderId": "7"}'
        )
        async with asyncio.timeout(60):
            while not reached.exists():
                await asyncio.sleep(0.02)
        assert cli_processes_in(_cwd(claude_rig, sid))

        assert await sessions.cancel_turn(sid)

        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "cancelled"
        assert await _gone(_cwd(claude_rig, sid)) == []
        gate.write_text("")  # nothing is left to finish the read
        snap = await sessions.send_and_wait(sid, "dex-script: say next")
        assert snap.turns[-1].final_text == "said: next"
        assert finished == []  # the read was stopped with its segment
    await store.close()


async def test_a_cancel_while_an_approval_waits_closes_it_through_the_real_cli(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-cancel-approval"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts

        assert await sessions.cancel_turn(sid)

        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "cancelled"
        assert [r.status for r in snap.turns[0].tool_calls] == ["cancelled"]
        assert not await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        assert claude_rig.example.refunds() == []
        # Its parked resume is released, and nothing else runs for the session.
        assert await _gone(_cwd(claude_rig, sid)) == []
        snap = await sessions.send_and_wait(sid, "dex-script: say next")
        assert snap.turns[-1].final_text == "said: next"
        assert claude_rig.example.refunds() == []
    await store.close()


async def test_a_cancel_from_a_second_client_while_the_turns_worker_is_killed(
    claude_rig: ClaudeRig,
    client: Client,
    engine: EmbeddedEngine,
    example_worker: WorkerProcess,
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-cancel-worker-killed"
    await sessions.start(sid, initial_message="dex-script: say never ;; pause held")
    await claude_rig.api.wait_paused("held", timeout=60)
    example_worker.kill()  # SIGKILL: the worker that runs the segment is gone
    assert await _gone(_cwd(claude_rig, sid)) == []  # its CLI died with it

    other = SessionClient(await engine.client(), flow, store)  # a second client
    example_worker.start()  # another worker takes the session
    assert await other.cancel_turn(sid, reason="stop", cancelled_by="ops")

    snap = await other.wait_for_idle(sid)
    assert snap.turns[0].status == "cancelled"
    assert cli_processes_in(_cwd(claude_rig, sid)) == []
    claude_rig.api.open_gate("held")
    snap = await other.send_and_wait(sid, "dex-script: say after")
    assert snap.turns[-1].final_text == "said: after"
    await store.close()

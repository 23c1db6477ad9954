"""SIGKILLed workers under the Claude agent: real worker processes, the fake CLI, counted effects.

The worker runs in a subprocess (`WorkerProcess`, serving
`fake_suite_agent:flow_from_env`); a test stops it at a gate, SIGKILLs it,
starts a new one, and counts in the ledger what ran: a recorded write never runs
again, a segment reruns whole.
"""

from __future__ import annotations

import asyncio

import pytest

from dex_agents.testing import WorkerProcess
from support.fake_suite_rig import SuiteEnv, worker_process
from support.processes import cli_processes_in

pytestmark = pytest.mark.timeout(240)


def worker_of(worker: WorkerProcess | None) -> WorkerProcess:
    assert worker is not None, "the rig runs no worker process"
    return worker


async def test_an_approved_write_survives_a_worker_restart_and_runs_once(
    suite: SuiteEnv,
) -> None:
    async with worker_process(suite) as rig:
        worker = worker_of(rig.worker)
        sid = "restart-while-waiting"
        await rig.sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        interrupt = await rig.interrupt(sid)
        worker.kill()
        worker.start()
        assert rig.ledger.count("create_refund_started") == 0
        snap = await rig.resolve(sid)
        assert snap.turns[0].final_text == "done: refunded order 7"
        assert rig.ledger.entries("create_refund") == [
            {
                "kind": "create_refund",
                "order_id": "7",
                "key": f"{sid}/turn-1/{interrupt.tool_call_id}",
            }
        ]


async def test_sigkill_during_a_single_attempt_write_records_outcome_unknown(
    suite: SuiteEnv,
) -> None:
    async with worker_process(suite) as rig:
        worker = worker_of(rig.worker)
        sid = "kill-mid-write"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call create_refund {"orderId": "8", '
            '"gate": "refund"}',
        )
        await rig.approve(sid)
        await rig.reached("refund")
        worker.kill()
        # A rerun would pass the gate and write: it must not happen.
        rig.open_gate("refund")
        worker.start()
        snap = await rig.sessions.wait_for_idle(sid)
        (record,) = snap.turns[0].tool_calls
        assert record.status == "outcome_unknown"
        assert "The outcome of create_refund is unknown" in snap.turns[0].final_text
        assert rig.ledger.count("create_refund_started") == 1
        assert rig.ledger.count("create_refund") == 0


async def test_sigkill_during_run_model_kills_the_cli_and_reruns_the_segment(
    suite: SuiteEnv,
) -> None:
    async with worker_process(suite) as rig:
        worker = worker_of(rig.worker)
        sid = "kill-mid-model"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call lookup_order {"orderId": "7"} '
            ";; pause model",
        )
        await rig.reached("model")
        assert cli_processes_in(rig.cwd(sid)), "the segment's CLI should be running"
        worker.kill()
        async with asyncio.timeout(10):
            while cli_processes_in(rig.cwd(sid)):
                await asyncio.sleep(0.05)
        rig.open_gate("model")
        worker.start()
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[0].final_text == "done: order 7: arrived broken"
        assert snap.transcript_head is not None
        assert snap.transcript_head.endswith("attempt-2")
        # The inline read reran with its segment; nothing was recorded for it.
        assert rig.ledger.count("lookup_order") == 2
        assert snap.turns[0].tool_calls == []


async def test_sigkill_during_a_resumed_segment_replays_the_record_again(
    suite: SuiteEnv,
) -> None:
    async with worker_process(suite) as rig:
        worker = worker_of(rig.worker)
        sid = "kill-mid-resume"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call create_refund {"orderId": "9"} '
            ";; pause answer",
        )
        await rig.approve(sid)
        await rig.reached("answer")
        assert rig.ledger.count("create_refund") == 1
        worker.kill()
        rig.open_gate("answer")
        worker.start()
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[0].final_text == "done: refunded order 9"
        assert snap.transcript_head is not None
        assert snap.transcript_head.endswith("attempt-2")
        assert rig.ledger.count("create_refund_started") == 1
        assert rig.ledger.count("create_refund") == 1


async def test_sigkill_during_a_resumed_segment_reruns_approved_bash(
    suite: SuiteEnv,
) -> None:
    async with worker_process(suite) as rig:
        worker = worker_of(rig.worker)
        sid = "kill-mid-resumed-bash"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call Bash {"command": "echo ran >> '
            'bash.log"} ;; pause answer',
        )
        await rig.approve(sid)
        await rig.reached("answer")
        assert rig.bash_log(sid) == ["ran"]
        worker.kill()
        rig.open_gate("answer")
        worker.start()
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "completed", snap.turns[0].error
        # A tool inside the CLI is at least once: the rerun segment ran it again,
        # with the approved input.
        assert rig.bash_log(sid) == ["ran", "ran"]

"""`approve` of an interrupt the session does not have, just after its worker stopped.

Temporal still lists the stopped worker, so the answer is sent; the library
now refuses it from the store's projection instead of recording it, and the
command names the pending interrupts rather than saying "recorded".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.temporal import EmbeddedEngine
from support.cli_harness import assert_one_line_error, invoke
from support.session_harness import approval_without_worker

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_approve_of_a_typo_with_no_worker_is_refused_naming_the_pending(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    paused = await approval_without_worker(
        client, tmp_path, flow_type, "typo-no-worker", order_id="4"
    )
    sid, iid = paused.sid, paused.interrupt_id
    target = ["--state-dir", str(engine.state_dir), "--store", str(paused.store.path)]
    result = await invoke("approve", sid, "intr_typo", "--timeout", "1", *target)
    assert_one_line_error(
        result,
        f"session {sid!r} has no interrupt 'intr_typo'; pending: {iid} (create_refund)",
    )
    assert "recorded" not in result.output
    history = [e async for e in client.get_workflow_handle(sid).fetch_history_events()]
    assert not any(
        e.HasField("workflow_execution_signaled_event_attributes") for e in history
    )
    await paused.store.close()

"""A session started with no message is listed at once, idle, by the store.

Before, the runtime store first heard of a session at the end of its first
turn: a session started idle (a web page that creates the session, then waits
for the person to type) was missing from `dex-agents sessions`, the web app's
lists and `list_snapshots` until then.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import invoke
from support.history import patch_markers
from support.session_harness import ledger_config


async def test_a_session_started_idle_is_listed_when_start_returns(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    idle, busy = (f"listed-{k}-{uuid.uuid4().hex[:8]}" for k in ("idle", "busy"))
    async with create_worker(client, [flow], store=store):
        await sessions.start(idle)
        # No wait: `start` returns once the first workflow task is done, and
        # the projection is written in it.
        listed = {str(s["session_id"]): s for s in await store.list_snapshots()}
        assert idle in listed, sorted(listed)
        assert listed[idle]["status"] == "idle"
        assert listed[idle]["flow_type"] == flow_type

        # A session started with a message publishes after its turn as
        # before: no extra publish, and no marker in its history.
        await sessions.start(busy, initial_message="say hi")
        await sessions.wait_for_idle(busy)
        idle_history = await client.get_workflow_handle(idle).fetch_history()
        busy_history = await client.get_workflow_handle(busy).fetch_history()
        assert "publish-idle-start" in patch_markers(idle_history)
        assert "publish-idle-start" not in patch_markers(busy_history)

        # The command line lists it.
        result = await invoke("sessions", "--store", str(tmp_path / "runtime.sqlite"))
        assert result.exit_code == 0, result.output
        assert idle in result.output
    await store.close()

"""What a session's history holds once the session has nothing in flight."""

from __future__ import annotations

import asyncio

from temporalio.client import Client


async def settled_history_length(
    client: Client, session_id: str, *, timeout: float = 30
) -> int:
    """The history's length once no workflow task and no activity is pending.

    An RPC's answer may come before the session's last workflow task is
    recorded as completed, and a notification Step may still run: counting
    before then would count their events as the next call's. A condition,
    waited for with a deadline.
    """
    handle = client.get_workflow_handle(session_id)
    async with asyncio.timeout(timeout):
        while True:
            raw = (await handle.describe()).raw_description
            if not raw.HasField("pending_workflow_task") and not raw.pending_activities:
                return raw.workflow_execution_info.history_length
            await asyncio.sleep(0.01)

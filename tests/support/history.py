"""What a session's history holds: its length once nothing is in flight, its patch markers."""

from __future__ import annotations

import asyncio
import json

from temporalio.client import Client, WorkflowHistory

PATCH_MARKER = "core_patch"
"""The marker name Temporal gives a `workflow.patched()` answer."""


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


def patch_markers(history: WorkflowHistory) -> list[str]:
    """The patch IDs the history's markers record, in order, each once."""
    found: list[str] = []
    for event in history.events:
        attributes = event.marker_recorded_event_attributes
        if attributes.marker_name != PATCH_MARKER:
            continue  # (reading `details[...]` of another marker would add the key)
        for payload in attributes.details["patch-data"].payloads:
            patch = json.loads(payload.data).get("id")
            if isinstance(patch, str) and patch not in found:
                found.append(patch)
    return found


def marked_in_first_task(history: WorkflowHistory) -> bool:
    """Whether the history's patch markers are all commands of its first workflow task."""
    completed = [
        e.event_id
        for e in history.events
        if e.HasField("workflow_task_completed_event_attributes")
    ]
    markers = [
        e.event_id
        for e in history.events
        if e.marker_recorded_event_attributes.marker_name == PATCH_MARKER
    ]
    return bool(markers) and all(completed[0] < m < completed[1] for m in markers)

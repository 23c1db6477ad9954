"""A Temporal worker that serves session flows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from .._errors import UserError
from ..stores import RuntimeStore
from ._activities import build_activities
from ._flow import AgentSessionFlow

WORKFLOW_BUG_TYPES: tuple[type[Exception], ...] = (
    AssertionError,
    AttributeError,
    IndexError,
    KeyError,
    TypeError,
    ValueError,
)
"""Errors in workflow code that fail the session instead of retrying its task forever.

A plain bug would otherwise leave the session RUNNING with a stuck task. A
nondeterminism error is deliberately not here: after a bad deploy it must keep
retrying, so that a fixed worker can pick the session up again.
"""


def create_worker(
    client: Client,
    flows: Sequence[AgentSessionFlow],
    *,
    store: RuntimeStore,
    task_queue: str | None = None,
    **worker_options: Any,
) -> Worker:
    """A worker for `flows`, all on one task queue (the first flow's by default).

    Sticky queues time out after 1 s, so a session whose worker crashed moves to
    a new worker in about a second instead of ten. A bug in workflow code fails
    the session visibly instead of retrying its task forever.
    """
    if not flows:
        raise UserError("`create_worker` needs at least one flow")
    queue = task_queue or flows[0].task_queue
    for flow in flows:
        if task_queue is None and flow.task_queue != queue:
            raise UserError(
                f"flows {flows[0].flow_type!r} and {flow.flow_type!r} use different task "
                "queues; pass `task_queue=` or run one worker per queue"
            )
    activities = [
        a
        for flow in flows
        for a in build_activities(flow.flow_type, flow.runner, flow.options, store)
    ]
    options: dict[str, Any] = {
        "sticky_queue_schedule_to_start_timeout": timedelta(seconds=1),
        "workflow_failure_exception_types": list(WORKFLOW_BUG_TYPES),
        "graceful_shutdown_timeout": timedelta(seconds=5),
    }
    options.update(worker_options)
    return Worker(
        client,
        task_queue=queue,
        workflows=[flow.workflow_class for flow in flows],
        activities=activities,
        **options,
    )

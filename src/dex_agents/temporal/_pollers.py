"""Whether a worker serves a task queue now, as Temporal's pollers say."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

POLLER_FRESHNESS = timedelta(seconds=90)
"""A worker re-polls at least once a minute (Temporal's long-poll limit), so a
poller last seen longer ago than this has stopped."""
_DESCRIBE_TIMEOUT = timedelta(seconds=5)


async def worker_seen(client: Client, task_queue: str) -> bool:
    """Whether a worker polled `task_queue` recently.

    Temporal lists pollers for minutes after they stop, so only recent polls
    count. A worker that stopped under a minute ago still counts: callers keep
    a deadline on the RPC itself too.
    """
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        timeout=_DESCRIBE_TIMEOUT,
    )
    now = datetime.now(UTC)
    return any(
        now - p.last_access_time.ToDatetime(tzinfo=UTC) < POLLER_FRESHNESS
        for p in response.pollers
    )

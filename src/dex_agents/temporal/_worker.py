"""A Temporal worker that serves session flows."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from .._errors import UserError
from ..stores import RuntimeStore
from ._flow import AgentSessionFlow
from ._plugin import SessionPlugin, check_flows, check_store
from ._workflow import WORKFLOW_BUG_TYPES


def create_worker(
    client: Client,
    flows: Sequence[AgentSessionFlow],
    *,
    store: RuntimeStore,
    task_queue: str | None = None,
    **worker_options: Any,
) -> Worker:
    """A worker for `flows`, all on one task queue (the first flow's by default).

    Sugar over `Worker(client, task_queue=..., plugins=[SessionPlugin(flows,
    store=store)])` with settings sessions want: sticky queues time out after
    1 s, so a session whose worker crashed moves to a new worker in about a
    second instead of ten; a bug in workflow code fails the session visibly
    instead of retrying its task forever; SIGTERM drains for 5 s.

    `task_queue` other than the flows' own is for a client whose flow names it
    too (`dataclasses.replace(flow, task_queue=...)`): `SessionClient` starts a
    flow's sessions on the flow's `task_queue`, so no other worker gets them.

    Raises:
        InvalidArgumentError: `flows` is not a list of flows (one flow: `[flow]`),
            or `store` is not a runtime store (a path or URL: open it first).
        UserError: no flows, or flows on different task queues.
    """
    flows = check_flows(flows, where="create_worker")
    check_store(store)
    if not flows:
        raise UserError("`create_worker` needs at least one flow")
    queue = task_queue or flows[0].task_queue
    for flow in flows:
        if task_queue is None and flow.task_queue != queue:
            raise UserError(
                f"flows {flows[0].flow_type!r} and {flow.flow_type!r} use different task "
                f"queues ({flows[0].task_queue!r}, {flow.task_queue!r}); run one worker "
                "per queue, or create the flows with the same `task_queue=`. (A "
                "worker's own `task_queue=` serves only clients whose flows name that "
                "queue: `SessionClient` starts a flow's sessions on the flow's.)"
            )
    options: dict[str, Any] = {
        "sticky_queue_schedule_to_start_timeout": timedelta(seconds=1),
        "workflow_failure_exception_types": list(WORKFLOW_BUG_TYPES),
        "graceful_shutdown_timeout": timedelta(seconds=5),
    }
    options.update(worker_options)
    plugins = [
        *options.pop("plugins", ()),
        SessionPlugin(flows, store=store, task_queue=queue),
    ]
    with warnings.catch_warnings():
        # A client from `EmbeddedEngine.client()` has a SessionPlugin of its own (the
        # converter); this one adds the flows. Temporal warns about two of a type.
        warnings.filterwarnings(
            "ignore", message="The same plugin type", category=UserWarning
        )
        return Worker(client, task_queue=queue, plugins=plugins, **options)


__all__ = ["WORKFLOW_BUG_TYPES", "create_worker"]

"""Worker subprocesses for tests: a flow reference, or one of the kit's scripted ledger flows.

The process itself is `dex_agents.temporal._worker_process` (the demo runs it
too); a `LedgerFlowConfig` travels to it as JSON in an environment variable
that `ledger_flow_from_env` reads back.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .._errors import UserError
from ..temporal import _worker_process
from ._ledger_flow import LEDGER_FLOW_ENV, LedgerFlowConfig

_LEDGER_FLOW_REF = "dex_agents.testing._ledger_flow:ledger_flow_from_env"


@dataclass(frozen=True, kw_only=True)
class WorkerProcessConfig(_worker_process.WorkerEndpoint):
    """Where the worker connects and what it serves."""

    flow: LedgerFlowConfig | None = None
    """A scripted ledger flow to serve, or"""
    flow_ref: str | None = None
    """`module:attr` (or `path/file.py:attr`) naming an `AgentSessionFlow` to serve."""


class WorkerProcess(_worker_process.WorkerProcess):
    """The engine's `WorkerProcess`, serving a flow reference or a scripted ledger flow."""

    def __init__(
        self,
        config: WorkerProcessConfig,
        workdir: Path,
        *,
        env: dict[str, str] | None = None,
    ) -> None:
        if config.flow is not None:
            env = {
                **(os.environ if env is None else env),
                LEDGER_FLOW_ENV: json.dumps(asdict(config.flow)),
            }
            flow_ref = _LEDGER_FLOW_REF
        elif config.flow_ref is not None:
            flow_ref = config.flow_ref
        else:
            raise UserError("`WorkerProcessConfig` needs `flow` or `flow_ref`")
        super().__init__(
            _worker_process.WorkerProcessConfig(
                address=config.address,
                namespace=config.namespace,
                store_path=config.store_path,
                flow_ref=flow_ref,
            ),
            workdir,
            env=env,
        )

"""Public test kit: a scripted runner, a ledger, worker subprocesses, and a scripted Messages API."""

from ._ledger import Ledger
from ._ledger_flow import (
    LEDGER_TOOL_POLICIES,
    LedgerFlowConfig,
    ledger_flow,
    ledger_tools,
)
from ._scripted_runner import ScriptedRunner, ScriptedTool
from ._worker_process import WorkerProcess, WorkerProcessConfig

__all__ = [
    "LEDGER_TOOL_POLICIES",
    "Ledger",
    "LedgerFlowConfig",
    "ScriptedRunner",
    "ScriptedTool",
    "WorkerProcess",
    "WorkerProcessConfig",
    "ledger_flow",
    "ledger_tools",
]

"""Public test kit: a scripted runner, a ledger, worker subprocesses, and a scripted Messages API.

`scripted_model()` runs the scripted Messages API for a program's own Claude
Code CLIs, so an agent runs offline with no API key (the README's examples).
"""

from ._fake_ledger_connector import (
    FAKE_LEDGER_MANIFEST,
    fake_ledger_connector_tools,
    fake_ledger_operations,
)
from ._hermetic import bundled_cli_path, hermetic_cli_env
from ._ledger import Ledger
from ._ledger_flow import (
    LEDGER_TOOL_POLICIES,
    LedgerFlowConfig,
    ledger_flow,
    ledger_tools,
)
from ._mock_messages_api import MockMessagesApi, RecordedRequest
from ._postgres_server import PostgresNotAvailable, PostgresTestServer
from ._refusing_proxy import RefusingProxy
from ._scripted_model import (
    SCRIPTED_MODEL_API_KEY,
    UNSCRIPTED_REPLY,
    ScriptedModel,
    scripted_model,
    scripted_model_env,
)
from ._scripted_runner import ScriptedRunner, ScriptedTool
from ._worker_process import WorkerProcess, WorkerProcessConfig

__all__ = [
    "FAKE_LEDGER_MANIFEST",
    "LEDGER_TOOL_POLICIES",
    "Ledger",
    "LedgerFlowConfig",
    "MockMessagesApi",
    "PostgresNotAvailable",
    "PostgresTestServer",
    "RecordedRequest",
    "RefusingProxy",
    "SCRIPTED_MODEL_API_KEY",
    "ScriptedModel",
    "ScriptedRunner",
    "ScriptedTool",
    "UNSCRIPTED_REPLY",
    "WorkerProcess",
    "WorkerProcessConfig",
    "bundled_cli_path",
    "fake_ledger_connector_tools",
    "fake_ledger_operations",
    "hermetic_cli_env",
    "ledger_flow",
    "ledger_tools",
    "scripted_model",
    "scripted_model_env",
]

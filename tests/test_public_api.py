"""The public surface is small and pinned, and layers point one way."""

from __future__ import annotations
import __future__

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import dex_agents

PUBLIC: dict[str, list[str]] = {
    "dex_agents": [
        "AgentFrameworkRunner",
        "AgentSessionOptions",
        "BudgetReachedError",
        "DexAgentsError",
        "EmbeddedEngine",
        "EngineConfig",
        "EngineError",
        "IdleTimeoutError",
        "InvalidArgumentError",
        "InvalidEditError",
        "InvalidOptionError",
        "MessageTooLargeError",
        "NoWorkerError",
        "RuntimeStore",
        "SQLiteRuntimeStore",
        "SessionBusyError",
        "SessionClient",
        "SessionEndedError",
        "SessionError",
        "SessionPlugin",
        "StoreUnavailableError",
        "ToolExecutionError",
        "ToolPolicy",
        "UnknownInterruptError",
        "UnknownSessionError",
        "UserError",
        "create_agent_session_flow",
        "create_worker",
        "current_deferred_tool_execution",
        "open_engine",
    ],
    "dex_agents.claude": [
        "ClaudeAgentDefinition",
        "ClaudeAgentOptionsContext",
        "ClaudeAgentOptionsFactory",
        "ClaudeAgentRunner",
        "ClaudeCodeToolDenial",
        "ClaudeCodeToolPermission",
        "create_claude_agent_session_flow",
    ],
    "dex_agents.cli": [],
    "dex_agents.connectors": [
        "ConnectorOperation",
        "ConnectorToolSource",
        "MCPServerToolSource",
    ],
    "dex_agents.notify": ["WebhookNotifier"],
    "dex_agents.otel": [],
    "dex_agents.postgres": ["PostgresRuntimeStore"],
    "dex_agents.s3": ["S3MediaStore"],
    "dex_agents.session": [
        "AgentEvent",
        "AgentFrameworkRunner",
        "AgentSessionOptions",
        "EditContext",
        "EventPayload",
        "EventRecord",
        "InterruptCreatedEvent",
        "InterruptResolvedEvent",
        "ModelRetryEvent",
        "ReasoningDeltaEvent",
        "RunModelContext",
        "SegmentRerunEvent",
        "SessionEndedEvent",
        "StoredMessage",
        "TextDeltaEvent",
        "ToolCall",
        "ToolCallAttemptFailedEvent",
        "ToolCallFinishedEvent",
        "ToolCallStartedEvent",
        "ToolCallsRequested",
        "ToolOutcome",
        "ToolPolicy",
        "TurnCancelledEvent",
        "TurnCompleted",
        "TurnCompletedEvent",
        "TurnFailedEvent",
        "TurnStartedEvent",
        "current_deferred_tool_execution",
    ],
    "dex_agents.stores": [
        "DirectoryMediaStore",
        "MediaStore",
        "RuntimeStore",
        "SQLiteRuntimeStore",
    ],
    "dex_agents.temporal": [
        "EmbeddedEngine",
        "EngineConfig",
        "SessionClient",
        "SessionPlugin",
        "create_agent_session_flow",
        "create_worker",
        "open_engine",
    ],
    "dex_agents.testing": [
        "Ledger",
        "MockMessagesApi",
        "ScriptedRunner",
        "WorkerProcess",
        "run_media_store_conformance",
        "run_runtime_store_conformance",
        "scripted_model",
    ],
    "dex_agents.web": ["create_app"],
}
"""Every public package and module, and exactly the names it exports.

A name added to or removed from an `__all__` fails the test until it is added
here too: the surface grows only on purpose.
"""


_FEATURE = type(__future__.annotations)


def _public_attributes(module: ModuleType) -> set[str]:
    """Names a user could import from `module`: no underscore, no submodule."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType | _FEATURE)
    }


def test_the_pin_lists_every_public_package() -> None:
    root = Path(dex_agents.__file__).parent
    found = {"dex_agents"} | {
        f"dex_agents.{path.name.removesuffix('.py')}"
        for path in root.iterdir()
        if not path.name.startswith("_")
        and path.name != "examples"  # example agents, run by reference; no API
        and (path.suffix == ".py" or (path / "__init__.py").exists())
    }
    assert found == set(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_all_lists_exactly_the_public_names_sorted(name: str) -> None:
    module = importlib.import_module(name)
    expected = PUBLIC[name]
    assert expected == sorted(expected), "keep the pin sorted"
    assert module.__all__ == expected
    assert _public_attributes(module) <= set(module.__all__), (
        "public attributes outside `__all__`: import them under a private name"
    )
    for attribute in module.__all__:
        assert getattr(module, attribute) is not None


@pytest.mark.parametrize(
    "module",
    [
        "dex_agents",
        "dex_agents.session",
        "dex_agents.stores",
        "dex_agents.claude",
        "dex_agents.connectors",
    ],
)
def test_engine_free_layers_do_not_import_temporalio(module: str) -> None:
    code = f"import sys, {module}; assert 'temporalio' not in sys.modules, 'temporalio imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_connectors_import_without_the_mcp_client() -> None:
    # MCP tool sources import `mcp` when they connect: the package stays
    # importable without the `claude` extra that brings it.
    code = (
        "import sys, dex_agents.connectors; "
        "assert 'mcp' not in sys.modules and 'jsonschema' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""The connector agent a killable worker subprocess serves (`flow_ref` by file path).

A `WorkerProcess` rebuilds the agent from `DEX_CONNECTOR_WORKER_CONFIG` (see
`flow_from_env`), so this module imports nothing from the tests but the fake
CLI (`support.fake_cli`, which the test puts on the worker's `PYTHONPATH`): a
SIGKILLed worker and its replacement count into the same fake-ledger `Ledger`,
and the connector's operations wait at gates in the config's gate directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions

from dex_agents import AgentSessionOptions
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.connectors import ConnectorToolSource
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing._fake_ledger_connector import fake_ledger_connector_tools
from support.fake_cli import fake_claude_cli_path

CONFIG_ENV = "DEX_CONNECTOR_WORKER_CONFIG"
"""The JSON `ConnectorWorkerConfig` a worker subprocess builds its flow from."""


@dataclass(frozen=True, kw_only=True)
class ConnectorWorkerConfig:
    """Everything that decides the agent; JSON, so a worker process can rebuild it."""

    flow_type: str
    ledger_path: str
    gate_dir: str
    """Where the connector's operations wait at gates."""
    workdir: str
    heartbeat_seconds: float = 2.0

    def to_json(self) -> str:
        """The config as `CONFIG_ENV` carries it."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ConnectorWorkerConfig:
        """Parse what `to_json` wrote."""
        return cls(**json.loads(text))


def build_flow(config: ConnectorWorkerConfig) -> AgentSessionFlow:
    """The session flow of the connector agent under `config.flow_type`."""
    cli_path = fake_claude_cli_path()
    source = ConnectorToolSource(
        fake_ledger_connector_tools(config.ledger_path, gate_dir=config.gate_dir)
    )

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        cwd = Path(config.workdir) / context.flow_id
        cwd.mkdir(parents=True, exist_ok=True)
        return ClaudeAgentOptions(
            cli_path=cli_path,
            cwd=str(cwd.resolve()),
            tools=["Bash"],
            setting_sources=[],
            env={},
        )

    return create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=options,
            tool_sources=[source],
            tool_source_listing_timeout=timedelta(seconds=2),
        ),
        config.flow_type,
        AgentSessionOptions(
            heartbeat_timeout=timedelta(seconds=config.heartbeat_seconds),
            retry_interval=timedelta(seconds=0.2),
            run_model_attempts=2,
        ),
    )


def flow_from_env() -> AgentSessionFlow:
    """The flow a worker subprocess serves: `build_flow` of `DEX_CONNECTOR_WORKER_CONFIG`."""
    return build_flow(ConnectorWorkerConfig.from_json(os.environ[CONFIG_ENV]))

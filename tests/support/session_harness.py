"""The test harness of session tests (imported by conftest and tests)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import AgentSessionFlow, SessionClient
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import LedgerFlowConfig


@dataclass
class Harness:
    flow: AgentSessionFlow
    sessions: SessionClient
    store: SQLiteRuntimeStore
    ledger: Ledger
    gate_dir: Path
    config: LedgerFlowConfig

    def session_id(self) -> str:
        return f"session-{uuid.uuid4().hex[:8]}"

    def open_gate(self, name: str) -> None:
        (self.gate_dir / name).write_text("")


def make_config(
    tmp_path: Path, flow_type: str, **overrides: object
) -> LedgerFlowConfig:
    gate_dir = tmp_path / "gates"
    gate_dir.mkdir(exist_ok=True)
    values: dict[str, object] = {
        "flow_type": flow_type,
        "ledger_path": str(tmp_path / "ledger.jsonl"),
        "gate_dir": str(gate_dir),
    }
    values.update(overrides)
    return LedgerFlowConfig(**values)  # pyright: ignore[reportArgumentType]

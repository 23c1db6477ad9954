"""Agents for `--agent` in CLI tests: the ledger flow, configured from the environment.

`DEX_AGENTS_TEST_DIR` holds the ledger and the gates; `DEX_AGENTS_TEST_FLOW` names
the flow type (and task queue), so each test can have its own.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow

_base = Path(os.environ.get("DEX_AGENTS_TEST_DIR") or tempfile.mkdtemp())
(_base / "gates").mkdir(parents=True, exist_ok=True)

flow = ledger_flow(
    LedgerFlowConfig(
        flow_type=os.environ.get("DEX_AGENTS_TEST_FLOW", "LedgerAgent"),
        ledger_path=str(_base / "ledger.jsonl"),
        gate_dir=str(_base / "gates"),
    )
)

not_a_flow = 42

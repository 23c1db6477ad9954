"""An agent for `--agent` in CLI tests: the ledger flow with a spend limit of 0.0015 USD.

Each scripted segment costs 0.001 USD, so two turns answer and the third
waits for a new limit (`budget_reached`). Configured like `agents.py`, from
`DEX_AGENTS_TEST_DIR` and `DEX_AGENTS_TEST_FLOW`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow

_base = Path(os.environ.get("DEX_AGENTS_TEST_DIR") or tempfile.mkdtemp())
(_base / "gates").mkdir(parents=True, exist_ok=True)

SPEND_LIMIT = 0.0015

flow = ledger_flow(
    LedgerFlowConfig(
        flow_type=os.environ.get("DEX_AGENTS_TEST_FLOW", "BudgetLedgerAgent"),
        ledger_path=str(_base / "ledger.jsonl"),
        gate_dir=str(_base / "gates"),
        spend_limit=SPEND_LIMIT,
    )
)

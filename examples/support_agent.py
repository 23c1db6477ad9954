"""The README's support agent, as `--agent examples/support_agent.py:flow` in a checkout.

The agent itself ships inside the package (`dex_agents/examples/support_agent.py`),
so that `--agent dex_agents.examples.support_agent:flow` works from any directory
and from an installed wheel; this file re-exports it for the repository's paths.
"""

from dex_agents.examples.support_agent import (
    ORDERS,
    create_refund,
    flow,
    ledger_path,
    lookup_order,
    options,
    refunds,
    session_dir,
)

__all__ = [
    "ORDERS",
    "create_refund",
    "flow",
    "ledger_path",
    "lookup_order",
    "options",
    "refunds",
    "session_dir",
]

"""The support-agent rig shared by the durable Claude tests (a uniquely named module)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dex_agents.testing import MockMessagesApi, RefusingProxy

EXAMPLES = Path(__file__).parents[2] / "examples"


@dataclass(kw_only=True)
class ClaudeRig:
    api: MockMessagesApi
    proxy: RefusingProxy
    env: dict[str, str]
    tmp: Path
    example: ModuleType

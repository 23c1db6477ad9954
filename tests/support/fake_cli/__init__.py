"""The tests' stand-in for the Claude Code CLI; see `_fake_claude_cli`.

Tests pass `fake_claude_cli_path()` as the SDK's `cli_path`. It is not part of
the `dex_agents.testing` kit and does not ship in the wheel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._fake_claude_cli import (
    FAKE_CLAUDE_GATE_DIR_ENV,
    FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV,
    fake_claude_cli_path,
)

__all__ = [
    "FAKE_CLAUDE_GATE_DIR_ENV",
    "FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV",
    "fake_claude_cli_path",
    "with_support_importable",
]

_TESTS_DIR = Path(__file__).resolve().parents[2]
"""The directory holding `support`, on `sys.path` in the test process."""


def with_support_importable(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with `tests/` first on `PYTHONPATH`, for a subprocess that imports `support`.

    A `WorkerProcess` imports its agent by file path, so an agent module that
    imports `support.fake_cli` needs the tests' directory on its path too.
    """
    rest = env.get("PYTHONPATH")
    path = str(_TESTS_DIR) if not rest else os.pathsep.join([str(_TESTS_DIR), rest])
    return {**env, "PYTHONPATH": path}

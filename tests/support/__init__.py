"""The tests' one harness, imported as `support.<name>` (`tests/` is on `sys.path`).

Rigs and fixtures (registered for every test by `tests/conftest.py`), the flow
modules that worker subprocesses load by file path or module name, and the fake
Claude Code CLI (`support.fake_cli`).
"""

from pathlib import Path

SUPPORT_DIR = Path(__file__).parent
"""This folder: the flow modules a worker subprocess loads by file path live here."""

TESTS_DIR = SUPPORT_DIR.parent
"""The folder holding `support`; a subprocess that imports `support` needs it on its path."""

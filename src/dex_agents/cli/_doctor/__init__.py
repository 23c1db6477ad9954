"""`dex-agents doctor`: what a worker needs, checked, one line each with its fix."""

from ._claude_cli import TESTED_CLI_VERSION
from ._command import doctor

__all__ = ["TESTED_CLI_VERSION", "doctor"]

"""The `dex-agents` command line: serve, chat with, inspect and approve sessions."""

from ._app import main

__all__ = ["main"]

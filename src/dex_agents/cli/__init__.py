"""The `dex-agents` command line: serve, chat with, inspect and approve sessions.

The console script runs `dex_agents.cli._app:main`; `python -m dex_agents.cli`
runs the same. Nothing here is an API.
"""

__all__: list[str] = []

"""`python -m dex_agents.cli`: the same as the `dex-agents` command."""

from ._app import main

main()

"""`python -m dex_agents.web`: the same as `dex-agents serve`."""

from ._cli import serve

serve(prog_name="dex-agents serve")

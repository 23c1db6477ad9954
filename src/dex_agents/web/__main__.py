"""`python -m dex_agents.web`: the same as `dex-agents serve`."""

from ..cli._serve import serve

serve(prog_name="dex-agents serve")

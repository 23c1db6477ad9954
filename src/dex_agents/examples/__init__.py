"""Example agents that ship with the package, so `dex-agents demo` and `dev` work anywhere.

`dex_agents.examples.support_agent:flow` is the README's support agent; it needs
the `claude` extra.
"""

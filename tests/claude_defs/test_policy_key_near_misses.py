"""A `tool_policies` key that names no tool is refused when it is a near miss.

A policy is looked up by exact name, so `lookup_ordr`, `bash` or the MCP name
`mcp__tools__sync_price` (the name the model sees) used to be ignored without a
word: `lookup_order`, `Bash` and `sync_price` then waited for approval as
unclassified, and `sync_price`, meant as an idempotent write, ran as a
single-attempt one. Now the definition refuses such a key, naming the tool it
meant; keys for other MCP servers' tools, unknown until the CLI runs, and bare
names that are not close to any tool (a newer CLI's tool) stay accepted.
"""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, tool

from dex_agents import InvalidOptionError
from dex_agents.claude import ClaudeAgentDefinition
from dex_agents.session import ToolPolicy
from support.declared_source import DeclaredSource

READ = ToolPolicy(effect="read")
WRITE = ToolPolicy(effect="idempotent_write")


def _tool(name: str) -> SdkMcpTool[Any]:
    @tool(name, f"the {name} tool", {"orderId": str})
    async def handler(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(args)}]}

    return handler


TOOLS = [_tool("lookup_order"), _tool("sync_price")]


def define(policies: dict[str, ToolPolicy], **fields: Any) -> ClaudeAgentDefinition:
    return ClaudeAgentDefinition(
        options=ClaudeAgentOptions(),
        custom_tools=TOOLS,
        tool_policies=policies,
        tool_sources=[DeclaredSource()],
        **fields,
    )


# (key, what the message must say)
NEAR_MISSES: list[tuple[str, str]] = [
    ("lookup_ordr", "did you mean 'lookup_order'?"),
    ("Lookup_Order", "did you mean 'lookup_order'?"),
    ("bash", "did you mean 'Bash'?"),
    ("webfetch", "did you mean 'WebFetch'?"),
    ("append_entri", "did you mean 'append_entry'?"),
    ("mcp__tools__sync_price", "name each of its tools bare; use 'sync_price'"),
    ("mcp__tools__append_entry", "name each of its tools bare; use 'append_entry'"),
    ("mcp__Tools__lookup_order", "use 'lookup_order'"),
    ("mcp__tools__sync_prise", "use 'sync_price'"),
    ("mcp__tools__refund", "use 'refund' if a tool source lists it"),
    ("mcp__tools", "give each tool its own key"),
]


@pytest.mark.parametrize(("key", "says"), NEAR_MISSES, ids=[k for k, _ in NEAR_MISSES])
def test_a_near_miss_key_is_refused_naming_the_tool_it_meant(
    key: str, says: str
) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        define({"lookup_order": READ, key: WRITE})
    message = str(caught.value)
    assert f"`tool_policies` key {key!r}" in message, message
    assert says in message, message


def test_the_mcp_name_of_a_custom_tool_is_refused_under_a_renamed_server_too() -> None:
    """The prefix that is refused is the agent's own server's, whatever its name."""
    with pytest.raises(InvalidOptionError, match="use 'sync_price'"):
        define({"mcp__shop__sync_price": WRITE}, custom_tool_server_name="shop")
    # Under the default name `mcp__tools__*` is the agent's server, not another's.
    with pytest.raises(InvalidOptionError, match="use 'sync_price'"):
        define({"mcp__tools__sync_price": WRITE})
    # With the server renamed, `tools` is any other server: its tool is accepted.
    define({"mcp__tools__sync_price": WRITE}, custom_tool_server_name="shop")


def test_the_refusal_says_how_a_source_tool_is_accepted() -> None:
    with pytest.raises(InvalidOptionError) as caught:
        define({"sync_prices": WRITE})
    assert "did you mean 'sync_price'?" in str(caught.value)
    assert "`declared_tool_names`" in str(caught.value)
    # Without sources the hint would mislead, so it is left out.
    with pytest.raises(InvalidOptionError) as caught:
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(),
            custom_tools=TOOLS,
            tool_policies={"sync_prices": WRITE},
        )
    assert "`declared_tool_names`" not in str(caught.value)


def test_keys_that_name_a_tool_or_may_are_accepted_beside_a_refused_one() -> None:
    accepted = {
        "lookup_order": READ,  # a custom tool, bare
        "append_entry": WRITE,  # a declared source tool, bare
        "Bash": READ,  # a Claude Code tool
        "WebFetch": READ,
        "mcp__github__create_issue": WRITE,  # another MCP server's tool
        "mcp__crm__lookup_ordr": READ,  # another server's, whatever it is named
        "Diagnostics": READ,  # maybe a newer CLI's tool: close to nothing
    }
    with pytest.raises(InvalidOptionError) as caught:
        define({**accepted, "sync_prce": WRITE})
    message = str(caught.value)
    assert "'sync_prce'" in message and "did you mean 'sync_price'?" in message
    for key in accepted:
        assert repr(key) not in message, message
    agent = define(accepted)
    assert dict(agent.tool_policies) == accepted

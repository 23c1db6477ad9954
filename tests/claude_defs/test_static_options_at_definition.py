"""Options given as they are (not a factory) are checked when the agent is defined.

Every turn checks its options; options that are one object can never change,
so options that would fail every turn used to pass the import and the worker's
start, then fail each turn with a good `InvalidOptionError`. Now the definition
raises that error. A factory's options are still checked in each attempt, and
an `allowed_tools` entry whose answer depends on the session's default effect
(unknown until a session runs) is left to that check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
    ToolAnnotations,
    tool,
)

from dex_agents import InvalidOptionError, ToolPolicy
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from support.claude_harness import SessionDriver, fake_options


@tool("lookup_order", "Look up an order", {"orderId": str})
async def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"order {args['orderId']}"}]}


@tool("place_order", "Place an order", {"sku": str})
async def place_order(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"placed {args['sku']}"}]}


POLICIES = {
    "lookup_order": ToolPolicy(effect="read"),
    "place_order": ToolPolicy(effect="non_idempotent_write"),
}


async def allow(*_args: Any) -> PermissionResultAllow:
    return PermissionResultAllow()


# (options, text of the refusal)
NEVER_WORK: list[tuple[str, ClaudeAgentOptions, str]] = [
    (
        "bypass",
        ClaudeAgentOptions(permission_mode="bypassPermissions"),
        "`permission_mode` 'bypassPermissions' is not allowed",
    ),
    (
        "can_use_tool",
        ClaudeAgentOptions(can_use_tool=allow),
        "`can_use_tool` is set in the Claude agent options, but the adapter owns it",
    ),
    (
        "allowed_write",
        ClaudeAgentOptions(allowed_tools=["mcp__tools__place_order"]),
        "`allowed_tools` lists 'mcp__tools__place_order'",
    ),
    (
        "allowed_server",
        ClaudeAgentOptions(allowed_tools=["mcp__tools__*"]),
        "`allowed_tools` lists 'mcp__tools__*'",
    ),
    (
        "skip_permissions",
        ClaudeAgentOptions(extra_args={"dangerously-skip-permissions": None}),
        "`extra_args['dangerously-skip-permissions']` is set",
    ),
    (
        "server_name_taken",
        ClaudeAgentOptions(
            mcp_servers={"tools": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}
        ),
        "`mcp_servers` uses the name 'tools'",
    ),
]


@pytest.mark.parametrize(
    ("options", "says"),
    [(o, s) for _, o, s in NEVER_WORK],
    ids=[n for n, _, _ in NEVER_WORK],
)
def test_options_that_would_fail_every_turn_are_refused_when_defined(
    options: ClaudeAgentOptions, says: str
) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        ClaudeAgentDefinition(
            options=options,
            custom_tools=[lookup_order, place_order],
            tool_policies=POLICIES,
        )
    assert says in str(caught.value), str(caught.value)


def test_an_allowed_tool_that_defers_by_its_annotations_is_refused_too() -> None:
    """Without a policy a custom tool's annotations decide it: `idempotentHint`
    makes it a write that runs in its own Step, whatever the session's default."""

    @tool(
        "sync_price",
        "Sync a price",
        {"sku": str},
        annotations=ToolAnnotations(idempotentHint=True),
    )
    async def sync_price(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"synced {args['sku']}"}]}

    with pytest.raises(InvalidOptionError, match="lists 'mcp__shop__sync_price'"):
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(allowed_tools=["mcp__shop__sync_price"]),
            custom_tools=[sync_price, place_order],
            custom_tool_server_name="shop",
        )
    # `place_order` has neither: the session's default decides, so a turn will.
    ClaudeAgentDefinition(
        options=ClaudeAgentOptions(allowed_tools=["mcp__shop__place_order"]),
        custom_tools=[sync_price, place_order],
        custom_tool_server_name="shop",
    )


# The SDK warns that `allowed_tools=["Bash"]` shadows can_use_tool; the
# adapter's PreToolUse hook still decides every call.
@pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")
async def test_an_entry_the_session_default_decides_is_left_to_each_turn(
    tmp_path: Path,
) -> None:
    """`allowed_tools=["Bash"]` without a policy defers under the default effect
    (unclassified) but not under a session whose default is read: it builds,
    and the turn of a session with the default refuses it before any CLI runs."""
    options = fake_options(tmp_path, allowed_tools=["Bash"])
    agent = ClaudeAgentDefinition(options=options)
    with pytest.raises(InvalidOptionError, match="`allowed_tools` lists 'Bash'"):
        await SessionDriver(ClaudeAgentRunner(agent)).turn("dex-script: say hi")
    read_default = SessionDriver(ClaudeAgentRunner(agent), default_tool_effect="read")
    assert (await read_default.turn("dex-script: say hi")).text == "said: hi"
    # While a read policy of the definition admits it, a write policy refuses it now.
    with pytest.raises(InvalidOptionError, match="`allowed_tools` lists 'Bash'"):
        ClaudeAgentDefinition(
            options=options,
            tool_policies={"Bash": ToolPolicy(effect="non_idempotent_write")},
        )
    ClaudeAgentDefinition(
        options=options, tool_policies={"Bash": ToolPolicy(effect="read")}
    )

"""A Claude agent definition refuses a bad field, and a custom tool the CLI would drop.

Each value below used to be accepted, then raised an AttributeError or a
TypeError deep in the runner, or (an invalid input schema) made the tool vanish
at run time: the model read "No such tool available". Now `ClaudeAgentDefinition`
raises `InvalidOptionError` when it is built, naming the field or tool, quoting
the value, and saying the fix.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypedDict

import pytest
from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, tool

from dex_agents import InvalidOptionError, UserError
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.claude._definition import ClaudeCodeToolDecision
from dex_agents.claude._tools import CustomTool
from dex_agents.session import RunModelContext, ToolPolicy
from support.declared_source import DeclaredSource


def _tool(name: str, schema: Any) -> SdkMcpTool[Any]:
    @tool(name, f"the {name} tool", schema)
    async def handler(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(args)}]}

    return handler


LOOKUP = _tool("lookup_order", {"orderId": str})

# (field, bad value, text the message must hold, text of the fix)
BAD_FIELDS: list[tuple[str, object, str, str]] = [
    ("options", None, "NoneType None", "options=ClaudeAgentOptions("),
    ("options", {"model": "x"}, "dict {'model': 'x'}", "options=ClaudeAgentOptions("),
    ("custom_tools", ["x"], "custom_tools[0]` must be", "@tool("),
    ("custom_tools", [LOOKUP, 5], "custom_tools[1]` must be", "@tool("),
    ("custom_tools", None, "NoneType None", "custom_tools=[lookup_order]"),
    ("custom_tools", "lookup", "str 'lookup'", "custom_tools=[lookup_order]"),
    ("custom_tools", LOOKUP, "SdkMcpTool", "custom_tools=[lookup_order]"),
    (
        "custom_tool_server_name",
        None,
        "NoneType None",
        "custom_tool_server_name='tools'",
    ),
    ("custom_tool_server_name", 5, "int 5", "custom_tool_server_name='tools'"),
    ("custom_tool_server_name", "my tools", "'my tools'", "letters, digits"),
    (
        "tool_policies",
        {"lookup_order": "read"},
        "str 'read'",
        'ToolPolicy(effect="read")',
    ),
    ("tool_policies", {"lookup_order": None}, "NoneType None", "ToolPolicy(effect="),
    ("tool_policies", {"": ToolPolicy(effect="read")}, "str ''", "tool_policies={"),
    ("tool_policies", {3: ToolPolicy(effect="read")}, "int 3", "tool_policies={"),
    ("tool_policies", None, "NoneType None", "tool_policies={"),
    ("tool_policies", ["lookup_order"], "list ['lookup_order']", "tool_policies={"),
    ("claude_code_tool_permission", "allow", "str 'allow'", "ClaudeCodeToolPermission"),
    ("tool_sources", None, "NoneType None", "tool_sources=[source]"),
    ("tool_sources", ["ledger"], "str 'ledger'", "ToolSource"),
    ("tool_source_listing_timeout", 10, "int 10", "timedelta(seconds=10)"),
    (
        "tool_source_listing_timeout",
        timedelta(0),
        "timedelta(0)",
        "timedelta(seconds=10)",
    ),
]


@pytest.mark.parametrize(
    ("field", "value", "quoted", "fix"),
    BAD_FIELDS,
    ids=[f"{field}={value!r}"[:60] for field, value, _, _ in BAD_FIELDS],
)
def test_a_bad_definition_field_is_refused_when_built(
    field: str, value: object, quoted: str, fix: str
) -> None:
    fields: dict[str, Any] = {"options": ClaudeAgentOptions(), field: value}
    with pytest.raises(InvalidOptionError) as caught:
        ClaudeAgentDefinition(**fields)
    message = str(caught.value)
    assert isinstance(caught.value, TypeError)  # as these refusals always were
    assert f"`{field}" in message, message
    assert quoted in message, message
    assert fix in message, message


BAD_SCHEMAS: list[tuple[str, dict[str, Any], str]] = [
    (
        "bad_read",
        {"type": "object", "properties": {"x": {"type": "nonsense"}}},
        "'nonsense' is not valid under any of the given schemas (at "
        "$.properties.x.type)",
    ),
    (
        "types_in_a_schema",
        {"type": "object", "properties": {"x": str}},
        "(at $.properties.x)",
    ),
    (
        "negative_length",
        {"type": "object", "properties": {"x": {"type": "string", "minLength": -1}}},
        "-1 is less than the minimum of 0",
    ),
    (
        "not_an_object",
        {"type": "string", "properties": {}},
        'must have "type": "object"',
    ),
    (
        "not_json",
        {"type": "object", "properties": {}, "x-tags": {1, 2}},
        "is not JSON",
    ),
]


@pytest.mark.parametrize(
    ("name", "schema", "problem"), BAD_SCHEMAS, ids=[n for n, _, _ in BAD_SCHEMAS]
)
def test_a_custom_tool_with_an_invalid_input_schema_is_refused_when_defined(
    name: str, schema: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(), custom_tools=[LOOKUP, _tool(name, schema)]
        )
    message = str(caught.value)
    assert f"custom tool {name!r}" in message, message
    assert problem in message, message
    assert "fix the schema passed to @tool" in message, message


class _Refund(TypedDict):
    orderId: str
    amount: float


GOOD_SCHEMAS: list[tuple[str, Any]] = [
    ("python_types", {"orderId": str, "items": list[str], "note": str | None}),
    ("typed_dict", _Refund),
    (
        "json_schema",
        {
            "type": "object",
            "properties": {"orderId": {"type": "string", "minLength": 1}},
            "required": ["orderId"],
            "additionalProperties": False,
        },
    ),
    (
        "draft_7",
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"pair": {"type": "array", "items": [{"type": "string"}]}},
        },
    ),
    ("no_properties", {}),
]


@pytest.mark.parametrize(
    ("name", "schema"), GOOD_SCHEMAS, ids=[n for n, _ in GOOD_SCHEMAS]
)
def test_a_valid_schema_is_served_as_checked(name: str, schema: Any) -> None:
    custom = _tool(name, schema)
    agent = ClaudeAgentDefinition(options=ClaudeAgentOptions(), custom_tools=[custom])
    served = CustomTool.from_sdk(agent.custom_tools[0])
    assert served.input_schema["type"] == "object"
    # The schema the definition checked is the one every call is checked against.
    served.validation_error({"orderId": "A-1"})


def test_every_default_is_valid_and_a_valid_non_default_set_builds() -> None:
    ClaudeAgentDefinition(options=ClaudeAgentOptions())

    def factory(_context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(model="claude-sonnet-4-5")

    def permission(
        _context: RunModelContext, _name: str, _input: dict[str, Any]
    ) -> ClaudeCodeToolDecision:
        return None

    agent = ClaudeAgentDefinition(
        options=factory,
        custom_tools=(LOOKUP, _tool("refund", _Refund)),
        tool_policies={
            "lookup_order": ToolPolicy(effect="read"),
            "mcp__github__create_issue": ToolPolicy(
                effect="non_idempotent_write", requires_approval=True
            ),
        },
        custom_tool_server_name="my-tools_2",
        claude_code_tool_permission=permission,
        tool_sources=[DeclaredSource()],
        tool_source_listing_timeout=timedelta(seconds=2),
    )
    assert [t.name for t in agent.custom_tools] == ["lookup_order", "refund"]


@pytest.mark.parametrize(
    ("flow_type", "session_options", "message"),
    [
        (None, None, "flow type None must be a string"),
        (5, None, "flow type 5 must be a string"),
        (
            "Agent",
            {"spend_limit": 5},
            "`session_options` must be an `AgentSessionOptions`",
        ),
        ("Agent", 5, "got int 5"),
    ],
)
def test_a_flow_of_a_wrong_type_or_options_is_refused_when_built(
    flow_type: object, session_options: object, message: str
) -> None:
    agent = ClaudeAgentDefinition(options=ClaudeAgentOptions())
    with pytest.raises(UserError) as refused:
        create_claude_agent_session_flow(agent, flow_type, session_options)  # pyright: ignore[reportArgumentType]
    assert message in str(refused.value)

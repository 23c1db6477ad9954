from typing import Any

import jsonschema
import pytest
from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, ToolAnnotations, tool

from dex_agents._errors import InvalidEditError
from dex_agents._schema import compiled_validator, schema_problem
from dex_agents.claude import ClaudeAgentDefinition
from dex_agents.claude._tools import (
    CLAUDE_CODE_TOOL_NAMES,
    CustomTool,
    check_custom_tools,
    result_text,
)
from dex_agents.session import ToolPolicy


def make_tool(name: str, annotations: ToolAnnotations | None = None) -> SdkMcpTool[Any]:
    @tool(name, f"the {name} tool", {"orderId": str}, annotations=annotations)
    async def handler(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(args)}]}

    return handler


@pytest.mark.parametrize("name", ["Bash", "Write", "Task", "Agent", "Read", "WebFetch"])
def test_claude_code_names_are_refused(name: str) -> None:
    with pytest.raises(TypeError, match="collides with a Claude Code tool"):
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(), custom_tools=[make_tool(name)]
        )


def test_mcp_names_and_duplicates_are_refused() -> None:
    with pytest.raises(TypeError, match="starts with `mcp__`"):
        check_custom_tools([make_tool("mcp__x__y")])
    with pytest.raises(TypeError, match="two custom tools"):
        check_custom_tools([make_tool("a"), make_tool("a")])
    with pytest.raises(TypeError, match="empty name"):
        check_custom_tools([make_tool("")])
    check_custom_tools([make_tool("bash"), make_tool("lookup")])


def test_server_name_is_checked() -> None:
    with pytest.raises(TypeError, match="custom_tool_server_name"):
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(), custom_tool_server_name="my tools"
        )


def test_known_cli_tools_include_the_2_1_327_preset() -> None:
    preset = {"Bash", "CronCreate", "Edit", "Monitor", "NotebookEdit", "Read", "Skill"}
    assert preset <= CLAUDE_CODE_TOOL_NAMES


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        (None, None),
        (ToolAnnotations(readOnlyHint=True), "read"),
        (ToolAnnotations(readOnlyHint=True, idempotentHint=True), "read"),
        (
            ToolAnnotations(idempotentHint=True, destructiveHint=True),
            "idempotent_write",
        ),
        (ToolAnnotations(destructiveHint=False), None),
        (
            ToolAnnotations(read_only_hint=False, idempotent_hint=True),
            "idempotent_write",
        ),
    ],
)
def test_annotations_classify(
    annotations: ToolAnnotations | None, effect: str | None
) -> None:
    assert CustomTool.from_sdk(make_tool("t", annotations)).annotation_effect == effect


def test_policy_wins_over_annotations_and_default() -> None:
    read = CustomTool.from_sdk(make_tool("t", ToolAnnotations(readOnlyHint=True)))
    plain = CustomTool.from_sdk(make_tool("p"))
    write = ToolPolicy(effect="non_idempotent_write")
    assert read.policy({"t": write}, "unclassified") == write
    assert read.policy({}, "unclassified") == ToolPolicy(effect="read")
    assert plain.policy({}, "idempotent_write") == ToolPolicy(effect="idempotent_write")


def test_schema_and_wire_tool() -> None:
    custom = CustomTool.from_sdk(make_tool("t", ToolAnnotations(readOnlyHint=True)))
    assert custom.input_schema == {
        "type": "object",
        "properties": {"orderId": {"type": "string"}},
        "required": ["orderId"],
    }
    assert custom.wire.name == "t"
    assert custom.wire.input_schema == custom.input_schema
    assert custom.validation_error({"orderId": "7"}) is None
    assert custom.validation_error({"orderId": 7}) == (
        "Input validation error: 7 is not of type 'string'"
    )
    assert custom.validation_error({}) == (
        "Input validation error: 'orderId' is a required property"
    )


def test_result_text_keeps_text_only() -> None:
    result = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "b"},
        ]
    }
    assert result_text(result) == "a\n[image content omitted]\nb"
    assert result_text({}) == ""


def test_a_schema_is_checked_and_its_validator_built_once() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    first = compiled_validator(schema)
    # An equal schema (another dict, keys in another order) reuses the validator.
    assert compiled_validator(dict(reversed(list(schema.items())))) is first
    assert isinstance(first, jsonschema.Draft202012Validator)
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert isinstance(compiled_validator(draft7), jsonschema.Draft7Validator)
    # An invalid schema is refused as `jsonschema.validate` refused it.
    with pytest.raises(jsonschema.SchemaError):
        compiled_validator({"type": "no-such-type"})


def test_an_edit_is_checked_by_its_schema_s_own_draft_and_an_invalid_schema_refuses_it() -> (
    None
):
    # Draft 7 reads a list `items` as one schema per position; 2020-12 would not.
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "string"}]}},
    }
    problem = schema_problem(draft7, {"pair": [1]}, "t")
    assert problem is not None and problem.field == "pair[0]"
    assert schema_problem(draft7, {"pair": ["a"]}, "t") is None
    # A tool whose schema is invalid refuses any edit, saying why and what to do.
    invalid = schema_problem({"type": "no-such-type"}, {}, "t")
    assert isinstance(invalid, InvalidEditError)
    assert "t's input schema is invalid" in str(invalid)
    assert "approve without an edit, or reject" in str(invalid)

"""A person's edit of a deferred call, checked as the model's own call would be.

An approval with an edited input must not be a way around what the session
checks of a call the model makes: the edit is validated against the tool's
input schema (the custom tool's, the source's, or the known shape of a tool
inside the CLI), and its policy is decided again on the edited input (the
application's `claude_code_tool_permission` sees it, so a per-input rule such as
"Bash `rm` needs approval" holds). A refusal names the field at fault.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .._errors import InvalidEditError
from .._schema import schema_problem
from ..session import (
    AgentEvent,
    EditContext,
    RunModelContext,
    StoredMessage,
    ToolCall,
    ToolPolicy,
)
from ..session._json import JsonObject
from ..session._policy import resolve_policy
from ..session._tool_sources import source_call_policy
from ._definition import ClaudeAgentDefinition, ClaudeCodeToolDenial
from ._sources import SOURCE_CALL_KIND
from ._tools import CustomTool

_TEXT = {"type": "string"}
_NON_EMPTY = {"type": "string", "minLength": 1}
_FLAG = {"type": "boolean"}


def _object_schema(
    required: dict[str, Any], optional: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A JSON object schema: its `required` properties, then its `optional` ones."""
    properties = {**required, **(optional or {})}
    return {"type": "object", "properties": properties, "required": list(required)}


CLI_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "Bash": _object_schema(
        {"command": _NON_EMPTY},
        {
            "timeout": {"type": "number"},
            "description": _TEXT,
            "run_in_background": _FLAG,
        },
    ),
    "Write": _object_schema({"file_path": _NON_EMPTY, "content": _TEXT}),
    "Edit": _object_schema(
        {"file_path": _NON_EMPTY, "old_string": _TEXT, "new_string": _TEXT},
        {"replace_all": _FLAG},
    ),
}
"""The input shapes of the CLI's own writing tools (CLI 2.1.327, as its tools list
them); any other CLI tool's edit must be a JSON object, and the CLI checks the rest
when the resumed segment runs it."""


async def check_edited_call(
    definition: ClaudeAgentDefinition,
    tools: Mapping[str, CustomTool],
    call: ToolCall,
    arguments: JsonObject,
    context: EditContext,
) -> ToolCall:
    """`call` with a person's edited `arguments`, checked and decided again.

    Raises:
        InvalidEditError: the edit does not fit the tool's schema, its source
            refuses it, or the application denies it.
    """
    policies = {**definition.tool_policies, **context.tool_policies}
    kind = call.metadata.get("kind")
    asked = call.policy.requires_approval
    if kind == SOURCE_CALL_KIND:
        return await _check_source_edit(definition, call, arguments, policies, asked)
    if kind == "custom":
        tool = tools.get(call.tool_name)
        if tool is None:
            raise InvalidEditError(
                "",
                f"{call.tool_name} is no longer a tool of this agent; reject the call",
            )
        problem = schema_problem(tool.input_schema, arguments, call.tool_name)
        if problem is not None:
            raise problem
        policy = tool.policy(policies, context.default_tool_effect)
        return _with(call, arguments, policy, asked)
    schema = CLI_TOOL_SCHEMAS.get(call.tool_name, {"type": "object"})
    problem = schema_problem(schema, arguments, call.tool_name)
    if problem is not None:
        raise problem
    policy = resolve_policy(call.tool_name, policies, context.default_tool_effect)
    permission = definition.claude_code_tool_permission
    if permission is not None:
        name = str(call.metadata.get("claude_tool_name") or call.tool_name)
        try:
            answer = permission(_run_context(context, call), name, dict(arguments))
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as e:
            raise InvalidEditError(
                "", f"the application refuses the edited input: {e or type(e).__name__}"
            ) from e
        if isinstance(answer, ClaudeCodeToolDenial):
            raise InvalidEditError(
                "", f"the application refuses the edited input: {answer.reason}"
            )
        if isinstance(answer, ToolPolicy):
            policy = answer
    return _with(call, arguments, policy, asked)


async def _check_source_edit(
    definition: ClaudeAgentDefinition,
    call: ToolCall,
    arguments: JsonObject,
    policies: Mapping[str, ToolPolicy],
    asked: bool,
) -> ToolCall:
    """A source call built again by its source from the edited input."""
    name = call.metadata.get("source_name")
    source = next((s for s in definition.tool_sources if s.source_name == name), None)
    if source is None:
        raise InvalidEditError(
            "", f"the source of {call.tool_name} ({name!r}) is gone; reject the call"
        )
    try:
        built = await source.build_call(call.tool_name, dict(arguments))
    except Exception as e:
        raise InvalidEditError(
            "",
            f"{call.tool_name} refuses the edited input: {e or type(e).__name__}; "
            "fix it and approve again, approve without an edit, or reject",
        ) from e
    policy = source_call_policy(built, policies.get(call.tool_name))
    edited = _with(call, dict(built.arguments), policy, asked)
    return replace(edited, metadata={**call.metadata, "source": built.metadata})


def _with(
    call: ToolCall, arguments: JsonObject, policy: ToolPolicy, asked: bool
) -> ToolCall:
    """`call` with the edited input and the policy decided on it.

    A call that waited because a hook asked keeps waiting's reason: approval
    stays required on its record, since a person gave it.
    """
    return replace(
        call,
        arguments=dict(arguments),
        arguments_ref=None,
        policy=ToolPolicy(
            effect=policy.effect,
            requires_approval=policy.requires_approval or asked,
        ),
    )


class _NoTranscript:
    async def messages(self) -> list[StoredMessage]:
        return []


class _NoEvents:
    def emit(self, event: AgentEvent) -> None:
        del event


def _run_context(context: EditContext, call: ToolCall) -> RunModelContext:
    """The context `claude_code_tool_permission` gets for an edit (no segment runs)."""
    return RunModelContext(
        session_id=context.session_id,
        flow_type=context.flow_type,
        turn_id=context.turn_id,
        step_execution_id=f"{context.turn_id}/edit/{call.tool_call_id}",
        attempt=1,
        pending=(),
        transcript=_NoTranscript(),
        events=_NoEvents(),
        tool_policies=dict(context.tool_policies),
        default_tool_effect=context.default_tool_effect,
    )

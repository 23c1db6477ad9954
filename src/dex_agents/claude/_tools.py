"""Custom tools: name rules, effects from annotations, schemas and recorded results.

Policies, interrupts and records name a custom tool bare (`create_refund`), while
the model sees it as `mcp__<server>__create_refund`. A bare name that is also a
Claude Code tool, or one that already looks like an MCP tool name, would make a
policy or a record ambiguous, so such names are refused when the agent is
defined; so is a handler that is not async, which no call could await.

Both paths that run a handler (an inline call in the segment's MCP server, a
deferred call in its tool Step) go through `run_handler`, whose one check of
the result's shape makes a wrong result read and log the same on both.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import jsonschema.exceptions
import mcp.types
from claude_agent_sdk import SdkMcpTool

# The SDK's own schema builder and content mapping (private, unchanged across the
# `claude` extra's range 0.2.184 to 0.2.189; `make cli-compat` checks a new one), so
# a custom tool looks and answers exactly as it would through `create_sdk_mcp_server`.
from claude_agent_sdk import (
    _build_input_schema as _sdk_input_schema,  # pyright: ignore[reportPrivateUsage]
)
from claude_agent_sdk import (
    _build_meta as _sdk_tool_meta,  # pyright: ignore[reportPrivateUsage]
)
from claude_agent_sdk import (
    _convert_tool_content as _sdk_tool_content,  # pyright: ignore[reportPrivateUsage]
)

from .._errors import InvalidOptionError, ToolExecutionError
from .._schema import compiled_validator
from ..session import ToolPolicy
from ..session._options import is_sync_function
from ..session._policy import ToolEffect, shown
from ..session._tool_sources import SourceTool, ToolSource

CLAUDE_CODE_TOOL_NAMES: frozenset[str] = frozenset(
    {
        # Listed by CLI 2.1.327's init message with the `claude_code` preset,
        # plus tools that older or differently configured CLIs offer.
        "Agent",
        "AskUserQuestion",
        "Bash",
        "BashOutput",
        "CronCreate",
        "CronDelete",
        "CronList",
        "DeferredToolPlaceholder",
        "Edit",
        "EnterPlanMode",
        "EnterWorktree",
        "ExitPlanMode",
        "ExitWorktree",
        "Glob",
        "Grep",
        "KillBash",
        "KillShell",
        "LS",
        "LSP",
        "ListAgents",
        "ListMcpResourcesTool",
        "Monitor",
        "MultiEdit",
        "NotebookEdit",
        "NotebookRead",
        "PowerShell",
        "Read",
        "ReadMcpResourceTool",
        "ReportFindings",
        "ScheduleWakeup",
        "SendMessage",
        "Skill",
        "SlashCommand",
        "StructuredOutput",
        "Task",
        "TaskCreate",
        "TaskGet",
        "TaskList",
        "TaskOutput",
        "TaskStop",
        "TaskUpdate",
        "TeamCreate",
        "TeamDelete",
        "TodoRead",
        "TodoWrite",
        "ToolSearch",
        "WebFetch",
        "WebSearch",
        "Workflow",
        "Write",
    }
)
"""Names a custom tool may not take, because policies name both kinds bare."""

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

logger = logging.getLogger(__name__)

TOOL_RESULT_SHAPE = "{'content': [{'type': 'text', 'text': '...'}]}"
"""How a handler's result looks, for the messages that refuse another one."""


def check_custom_tools(tools: Sequence[SdkMcpTool[Any]]) -> None:
    """Refuse custom tools that are not tools, are ambiguous, or the CLI would drop.

    Names that would make a policy or a record ambiguous are refused, and so is
    an input schema the CLI cannot use.

    Raises:
        TypeError: An item is not a `claude_agent_sdk.tool`; a name is empty,
            collides with a Claude Code tool, starts with `mcp__`, or repeats
            another custom tool; a handler is a plain `def` (see
            `is_sync_function`); or an input schema is not a valid JSON Schema
            of an object (the CLI would drop the tool, and the model would read
            that no such tool is available).
    """
    seen: set[str] = set()
    for index, tool in enumerate(cast("Sequence[object]", tools)):
        if not isinstance(tool, SdkMcpTool):
            raise InvalidOptionError(
                f"`custom_tools[{index}]` must be a tool made with "
                f"`claude_agent_sdk.tool`, got {shown(tool)}; decorate its handler "
                'with @tool("name", "description", {"orderId": str})'
            )
        checked = cast("SdkMcpTool[Any]", tool)
        name = cast(object, checked.name)  # what was passed, unchecked
        if not isinstance(name, str):
            raise InvalidOptionError(
                f"custom tool `custom_tools[{index}]` has the name {shown(name)}; "
                "give it a name that is a str"
            )
        if name in CLAUDE_CODE_TOOL_NAMES:
            raise InvalidOptionError(
                f"custom tool {name!r} collides with a Claude Code tool; rename it "
                "(policies and records name custom tools bare)"
            )
        if name.startswith("mcp__"):
            raise InvalidOptionError(
                f"custom tool {name!r} starts with `mcp__`; rename it (policies and "
                "records name custom tools bare, and `mcp__` names MCP server tools)"
            )
        if not name:
            raise InvalidOptionError("a custom tool has an empty name; give it one")
        if name in seen:
            raise InvalidOptionError(f"two custom tools are named {name!r}; rename one")
        seen.add(name)
        handler = cast(object, checked.handler)
        if not callable(handler):
            raise InvalidOptionError(
                f"custom tool {name!r} has the handler {shown(handler)}; decorate an "
                "async function with @tool"
            )
        if is_sync_function(handler):
            raise InvalidOptionError(
                f"the handler of custom tool {name!r} is not async "
                f"({getattr(handler, '__qualname__', shown(handler))}): the adapter "
                "awaits it, so every call would fail and the model read an error "
                "instead of its result; define it with `async def`"
            )
        _check_input_schema(checked)


def _check_input_schema(tool: SdkMcpTool[Any]) -> None:
    """Refuse `tool` unless its input schema, as the runtime serves it, is valid.

    The schema is the one `CustomTool.from_sdk` builds (a dict of Python types
    becomes a JSON Schema there), checked as every call's input is: against
    its metaschema, by `compiled_validator`.

    Raises:
        InvalidOptionError: The schema is not a JSON Schema of an object.
    """
    fix = (
        "fix the schema passed to @tool (a JSON Schema such as "
        '{"type": "object", "properties": {"orderId": {"type": "string"}}}, or '
        'a dict of Python types such as {"orderId": str})'
    )
    try:
        schema = CustomTool.from_sdk(tool).input_schema
    except (TypeError, ValueError) as e:  # pydantic's ValidationError is a ValueError
        raise InvalidOptionError(
            f"custom tool {tool.name!r} cannot be served: {e}; {fix}"
        ) from e
    if schema.get("type") != "object":
        raise InvalidOptionError(
            f"the input schema of custom tool {tool.name!r} must have "
            f'"type": "object" (a tool\'s input is an object), got '
            f"{shown(schema.get('type'))}; {fix}"
        )
    try:
        compiled_validator(schema)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidOptionError(
            f"the input schema of custom tool {tool.name!r} is not a valid JSON "
            f"Schema: {e.message} (at {e.json_path}); the CLI would drop the tool "
            f"and the model read that no such tool is available; {fix}"
        ) from e
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as e:
        raise InvalidOptionError(
            f"the input schema of custom tool {tool.name!r} is not JSON ({e}), so "
            f"it cannot be sent to the CLI; {fix}"
        ) from e


@dataclass(frozen=True, slots=True)
class CustomTool:
    """One custom tool as the adapter serves, classifies and runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    """The JSON Schema sent to the CLI and checked before the handler runs."""
    handler: ToolHandler
    hints: Mapping[str, Any]
    """MCP annotations in their wire spelling (`readOnlyHint`, ...)."""
    wire: mcp.types.Tool
    source: ToolSource | None = None
    """The tool source that offers it; None for the application's own tool."""
    replay_only: bool = False
    """A source tool served only so a resumed call gets its record: its source no
    longer lists it, so a new call of it is denied."""

    @classmethod
    def from_source(
        cls, source: ToolSource, tool: SourceTool, *, replay_only: bool = False
    ) -> CustomTool:
        """Serve a source's tool, without MCP annotations.

        Without `readOnlyHint` the CLI runs served tools one at a time in the
        model's order, so a source's writes of one reply stay ordered.
        """

        async def never_inline(_args: dict[str, Any]) -> dict[str, Any]:
            # A source call always defers: the hook never allows one inline.
            raise RuntimeError(f"{tool.name} runs only in its tool step")

        schema: dict[str, Any] = dict(tool.input_schema)
        wire = mcp.types.Tool.model_validate(
            {"name": tool.name, "description": tool.description, "inputSchema": schema}
        )
        return cls(
            name=tool.name,
            description=tool.description,
            input_schema=schema,
            handler=never_inline,
            hints={},
            wire=wire,
            source=source,
            replay_only=replay_only,
        )

    @classmethod
    def from_sdk(cls, tool: SdkMcpTool[Any]) -> CustomTool:
        """Wrap a `claude_agent_sdk.tool` definition."""
        schema = _sdk_input_schema(tool)
        hints: dict[str, Any] = (
            {}
            if tool.annotations is None
            else tool.annotations.model_dump(by_alias=True, exclude_none=True)
        )
        wire = mcp.types.Tool.model_validate(
            {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": schema,
                "annotations": tool.annotations,
                "_meta": _sdk_tool_meta(tool),
            }
        )
        return cls(
            name=tool.name,
            description=tool.description,
            input_schema=schema,
            handler=tool.handler,
            hints=hints,
            wire=wire,
        )

    @property
    def annotation_effect(self) -> ToolEffect | None:
        """The effect its MCP annotations imply, or None without a hint.

        `readOnlyHint` is read; otherwise `idempotentHint` is idempotent_write,
        whatever `destructiveHint` says.
        """
        if self.hints.get("readOnlyHint") is True:
            return "read"
        if self.hints.get("idempotentHint") is True:
            return "idempotent_write"
        return None

    def policy(
        self, policies: Mapping[str, ToolPolicy], default_effect: ToolEffect
    ) -> ToolPolicy:
        """Its policy entry, else its annotations' effect, else the default effect."""
        policy = policies.get(self.name)
        if policy is not None:
            return policy
        return ToolPolicy(effect=self.annotation_effect or default_effect)

    def validation_error(self, arguments: Mapping[str, Any]) -> str | None:
        """Why `arguments` do not fit the input schema, or None when they do."""
        # As `jsonschema.validate` reports it (the best match), with the
        # validator built once per schema instead of on every call.
        # typeshed leaves best_match's return unannotated (the best error, or None).
        error = cast(
            "jsonschema.exceptions.ValidationError | None",
            jsonschema.exceptions.best_match(  # pyright: ignore[reportUnknownMemberType]
                compiled_validator(self.input_schema).iter_errors(dict(arguments))
            ),
        )
        if error is not None:
            return f"Input validation error: {error.message}"
        return None


async def run_handler(tool: CustomTool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run `tool`'s handler on `arguments` and return its result, checked.

    Both paths run a custom tool through this: an inline call in the segment's
    MCP server and a deferred call in its tool Step. So a result of the wrong
    shape is refused the same way on both (the model reads the same message,
    and it is logged here, where the handler ran), instead of one path
    converting it and the other failing in the SDK or the CLI.

    Raises:
        ToolExecutionError: The handler ran but returned something that is not
            a tool result (see `checked_result`). It is the developer's error,
            so it is not retried: a deferred call ends `failed`, and the model
            reads the message, which says the handler ran and the fix.
        Exception: Whatever the handler raised, as it raised it.
    """
    returned: object = tool.handler(arguments)
    if inspect.isawaitable(returned):
        returned = await returned
    try:
        return checked_result(tool.name, returned)
    except ToolExecutionError as e:
        logger.error("%s", e)
        raise


def checked_result(tool_name: str, result: object) -> dict[str, Any]:
    """`result` if it has the shape of a tool result; else a message for the model.

    A tool result is a dict whose `content` is a list of content blocks: text
    blocks with a str `text`, image blocks with str `data` (base64) and
    `mimeType`, and the others the SDK maps (`resource_link`, `resource` with
    a str `text`; unknown types are dropped, as the SDK drops them). Text that
    is not a str is refused rather than converted, since MCP has no other text.

    Raises:
        ToolExecutionError: It is not, naming the tool, what was wrong and the fix.
    """

    def refused(problem: str, fix: str) -> ToolExecutionError:
        return ToolExecutionError(
            f"the handler of tool {tool_name!r} returned {problem}: {fix} (it ran, "
            "so what it did before returning may have taken effect)"
        )

    return_one = f"return a tool result such as {TOOL_RESULT_SHAPE}"
    if not isinstance(result, dict):
        got = "None" if result is None else shown(result)
        raise refused(f"{got}, not a tool result ({TOOL_RESULT_SHAPE})", "return one")
    checked = cast("dict[str, Any]", result)
    # No `content` is an empty result, as the SDK's own server reads it.
    content: object = checked.get("content", [])
    if not isinstance(content, list):
        raise refused(
            f"a dict whose `content` is {shown(content)}, not a list of content blocks",
            return_one,
        )
    for index, item in enumerate(cast("list[object]", content)):
        where = f"`content[{index}]`"
        block: object = item
        kind = (
            cast("dict[str, object]", block).get("type")
            if isinstance(block, dict)
            else None
        )
        if not isinstance(kind, str):
            raise refused(
                f"{where} = {shown(cast(object, block))}, not a content block "
                "(a dict with a str `type`)",
                return_one,
            )
        fields = cast("dict[str, object]", block)
        for name, fix in _BLOCK_STR_FIELDS.get(kind, {}).items():
            value = fields.get(name)
            if not isinstance(value, str):
                article = "an" if kind[:1] in "aeiou" else "a"
                raise refused(
                    f"{article} {kind} block ({where}) whose `{name}` is "
                    f"{shown(value)}, not a str",
                    fix,
                )
        resource: object = fields.get("resource")
        if kind == "resource" and not (
            isinstance(resource, dict)
            and isinstance(cast("dict[str, object]", resource).get("text", ""), str)
        ):
            raise refused(
                f"a resource block ({where}) whose `resource` is "
                f"{shown(cast(object, resource))}, not a dict with a str `text`",
                return_one,
            )
    return checked


_BLOCK_STR_FIELDS: dict[str, dict[str, str]] = {
    "text": {
        "text": "make it a str (str(value), or value.isoformat() for a datetime)",
    },
    "image": {
        "data": "give the image as base64 text (base64.b64encode(raw).decode())",
        "mimeType": 'give its media type as a str, such as "image/png"',
    },
}
"""The fields of a content block that MCP requires to be str, and each one's fix."""


def result_content(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A handler result's content as MCP content blocks, as the SDK maps it.

    `result` is one `checked_result` accepted.
    """
    content = result.get("content", [])
    # The handler's JSON: isinstance leaves the item type unknown; the SDK maps dicts.
    return _sdk_tool_content(
        cast(list[dict[str, Any]], content) if isinstance(content, list) else []
    )


def result_is_error(result: Mapping[str, Any]) -> bool:
    """Whether a handler result reports an error (`is_error` or `isError`)."""
    return bool(result.get("is_error") or result.get("isError"))


def result_text(result: Mapping[str, Any]) -> str:
    """The text a record keeps of a handler result.

    Recorded results keep text only: other content becomes a placeholder such
    as `[image content omitted]`, so a record stays small and replays as text.
    """
    parts: list[str] = []
    for block in result_content(result):
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{block.get('type', 'unknown')} content omitted]")
    return "\n".join(parts)

"""The in-process MCP server that serves custom tools to the CLI.

`create_sdk_mcp_server` hands a tool handler only its arguments, but the adapter
must know which call it is serving: CLI 2.1.327 sends the tool use ID of every
`tools/call` in `_meta["claudecode/toolUseId"]`. So the adapter builds its own
`mcp.server.Server`, which sees the request's `_meta`, and runs a tool only under
the tool use ID and tool name that the PreToolUse decision permitted:

- an allowed inline call (a custom read) runs its handler with the input the CLI
  sends, after its schema check;
- the resumed call of a deferred custom tool returns its final record (output,
  failure, rejection or unknown outcome) without running the handler, once (a
  primed call, whose hook allowed it before the record existed, waits for it);
- anything else does not run and returns an error result the model reads.

The server is passed to the SDK as `{"type": "sdk", "name": ..., "instance": ...}`,
which the Python SDK also declares in `--mcp-config`, so the tools exist when a
resumed call runs at CLI start-up (an undeclared server gives
`tool_deferred_unavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import mcp.types
from claude_agent_sdk import McpSdkServerConfig
from mcp.server import Server

from ..session._records import ToolRecord
from ._gate import ToolCallGate
from ._tools import CustomTool, result_content, result_is_error, run_handler

TOOL_USE_ID_META_KEY = "claudecode/toolUseId"
"""Where CLI 2.1.327 puts the tool use ID in a `tools/call` request's `_meta`."""


def build_custom_tool_server(
    name: str,
    tools: Mapping[str, CustomTool],
    gate: ToolCallGate,
    *,
    replay_images: Mapping[str, str] | None = None,
) -> McpSdkServerConfig:
    """An SDK MCP server config for `tools` that obeys `gate`'s decisions.

    `replay_images` maps the key of each image a replayed record names to its
    base64 text, read from the media store before the CLI starts.
    """

    async def list_tools(
        _ctx: Any, _params: mcp.types.PaginatedRequestParams | None
    ) -> mcp.types.ListToolsResult:
        return mcp.types.ListToolsResult(tools=[tool.wire for tool in tools.values()])

    async def call_tool(
        _ctx: Any, params: mcp.types.CallToolRequestParams
    ) -> mcp.types.CallToolResult:
        return await serve_call(
            tools,
            gate,
            tool_name=params.name,
            arguments=dict(params.arguments or {}),
            tool_use_id=tool_use_id_of(params.meta),
            replay_images=replay_images,
        )

    server: Server[Any] = Server(
        name, version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
    )
    return McpSdkServerConfig(type="sdk", name=name, instance=server)


def tool_use_id_of(meta: object) -> str | None:
    """The CLI's tool use ID from a request's `_meta`, if it sent one."""
    if isinstance(meta, Mapping):
        value = cast(Mapping[str, object], meta).get(TOOL_USE_ID_META_KEY)
        return value if isinstance(value, str) else None
    return None


async def serve_call(
    tools: Mapping[str, CustomTool],
    gate: ToolCallGate,
    *,
    tool_name: str,
    arguments: dict[str, Any],
    tool_use_id: str | None,
    replay_images: Mapping[str, str] | None = None,
) -> mcp.types.CallToolResult:
    """Serve one `tools/call` as the gate permits; see the module docstring."""
    if tool_use_id is not None:
        # A primed call (allowed before its record exists) waits for its record.
        await gate.decided(tool_use_id)
    decision = (
        None if tool_use_id is None else gate.permit_served_call(tool_use_id, tool_name)
    )
    if decision is None:
        return error_result(
            f"{tool_name} did not run: the session did not authorize this call."
        )
    if decision.kind == "replay":
        assert decision.record is not None
        return recorded_result(decision.record, replay_images)
    tool = tools.get(tool_name)
    if tool is None:
        return error_result(f"{tool_name} did not run: this agent has no such tool.")
    problem = tool.validation_error(arguments)
    if problem is not None:
        return error_result(problem)
    try:
        # A result of the wrong shape is refused (and logged) there, as a
        # deferred call's is, so the model reads why rather than the SDK's or
        # the CLI's error about what the handler returned.
        result = await run_handler(tool, arguments)
    except Exception as e:
        # An inline read cannot fail RunModel: the model reads the error instead.
        return error_result(str(e) or type(e).__name__)
    return mcp.types.CallToolResult.model_validate(
        {"content": result_content(result), "isError": result_is_error(result)}
    )


def recorded_result(
    record: ToolRecord, replay_images: Mapping[str, str] | None = None
) -> mcp.types.CallToolResult:
    """What a resumed deferred call returns: its final record, as the model reads it.

    A finished record's images follow its text as MCP image content, which the
    CLI turns into Claude image blocks inside the tool result.
    """
    content: list[dict[str, Any]] = [{"type": "text", "text": record.model_text}]
    if record.status == "finished":
        images = replay_images or {}
        content.extend(
            {"type": "image", "data": images[ref.key], "mimeType": ref.media_type}
            for ref in record.images
        )
    return mcp.types.CallToolResult.model_validate(
        {
            "content": content,
            "isError": record.status != "finished",
        }
    )


def error_result(text: str) -> mcp.types.CallToolResult:
    """An error result whose text the model reads."""
    return mcp.types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "isError": True}
    )

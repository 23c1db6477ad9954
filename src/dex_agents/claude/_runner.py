"""`ClaudeAgentRunner`: the Claude Agent SDK as a durable session's runner."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions

from .._errors import InvalidOptionError, ToolExecutionError, UserError
from ..session import (
    EditContext,
    RunModelContext,
    ToolCall,
    ToolCallsRequested,
    ToolOutcome,
    TurnCompleted,
)
from ..session._json import JsonObject
from ..session._media import ImageReference
from ..session._records import (
    DeferredToolExecution,
    reset_current_deferred_tool_execution,
    set_current_deferred_tool_execution,
)
from ..session._tool_sources import ToolStepOptions
from ._definition import ClaudeAgentDefinition, ClaudeAgentOptionsContext
from ._edits import check_edited_call
from ._options import check_options, deferring_tools
from ._park import LateEvents, ParkedSegment
from ._segment import Segment, SegmentSetup
from ._sources import SOURCE_CALL_KIND, execute_source_call, segment_tools
from ._tools import (
    CustomTool,
    result_content,
    result_is_error,
    result_text,
    run_handler,
)
from ._transcript import USER_PROMPT_ITEM_KIND

APPROVED_CLI_TOOL_OUTPUT = (
    "Approved; the call runs inside the resumed Claude Code turn."
)
"""Record output of an approved tool that runs inside the CLI."""

_PARK_HOOK_MARGIN = 60.0
"""Seconds a parked segment's hook timeout outlasts its window."""


class ClaudeAgentRunner:
    """Runs a `ClaudeAgentDefinition` one turn segment at a time.

    Each `run_model` runs one Claude Code CLI process until it answers or
    defers a call; `execute_deferred_tool` runs a deferred custom tool in its
    tool Step, or records an approved CLI tool that the resumed segment runs.

    Raises:
        TypeError: The definition's custom tools are invalid.
    """

    def __init__(self, definition: ClaudeAgentDefinition) -> None:
        self.definition = definition
        self._tools = {
            tool.name: CustomTool.from_sdk(tool) for tool in definition.custom_tools
        }
        if definition.media_store is not None:
            # The capability exists only with a store: the session checks for
            # the method when the flow is created and refuses images without it.
            self.build_user_message_with_images = self._build_user_message_with_images
        if not definition.tool_sources:
            # A resume can park only without tool sources: a source is listed
            # when its segment starts, and a parked segment starts before the
            # decision, so it could offer tools that vanished while the call
            # waited. With sources, every decision resumes cold.
            self.park_resume = self._park_resume

    def build_user_message(self, text: str) -> JsonObject:
        """The stored item of a user message: `{"kind": "user_prompt", "text": ...}`."""
        return {"kind": USER_PROMPT_ITEM_KIND, "text": text}

    def _build_user_message_with_images(
        self, text: str, images: Sequence[ImageReference]
    ) -> JsonObject:
        """The stored item of a user message with images: `user_prompt` plus `images`.

        `images` are the references' wire fields; RunModel reads the bytes.
        """
        return {
            "kind": USER_PROMPT_ITEM_KIND,
            "text": text,
            "images": [ref.to_wire() for ref in images],
        }

    def validate_session_options(self, *, compaction: object | None) -> None:
        """Refuse a compaction policy: Claude Code compacts inside the CLI.

        Raises:
            UserError: `compaction` is set.
        """
        if compaction is not None:
            raise UserError(
                "a Claude agent session cannot use a compaction policy: Claude Code "
                "keeps and compacts its own transcript; remove `compaction`"
            )

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        """Run one segment; see `Segment`.

        Raises:
            TypeError: The options set something the adapter owns or that would
                let a tool skip its approval or Step.
            SessionError: The CLI failed or returned an error result.
        """
        return await Segment(await self._setup(context), context).run()

    async def _park_resume(
        self, context: RunModelContext, *, window: float
    ) -> ParkedSegment:
        """Start `context`'s resumed segment now; its deferred call waits for `resume`.

        `context.resume.records` may be empty: the records come with the
        adopting attempt's context. The hook's timeout outlasts `window`
        (seconds), the longest the caller keeps the park; see `_park`.
        """
        events = LateEvents()
        context = dataclasses.replace(context, events=events)
        segment = Segment(
            await self._setup(context),
            context,
            parked=True,
            hook_timeout=window + _PARK_HOOK_MARGIN,
        )
        return ParkedSegment(segment, events)

    async def _setup(self, context: RunModelContext) -> SegmentSetup:
        options = self.options_for(context)
        policies = {**self.definition.tool_policies, **context.tool_policies}
        server_name = self.definition.custom_tool_server_name
        tools = await segment_tools(
            context=context,
            custom=self._tools,
            sources=self.definition.tool_sources,
            timeout=self.definition.tool_source_listing_timeout,
        )

        must_defer = deferring_tools(
            server_name=server_name,
            tools=tools,
            # Declared ones too: a source whose listing failed still owns them.
            source_tools=[
                name
                for source in self.definition.tool_sources
                for name in source.declared_tool_names
            ],
            policies=policies,
            default_effect=context.default_tool_effect,
        )
        check_options(options, server_name=server_name, must_defer=must_defer)
        return SegmentSetup(
            options=options,
            tools=tools,
            server_name=server_name,
            policies=policies,
            permission=self.definition.claude_code_tool_permission,
            media_store=self.definition.media_store,
        )

    def options_for(self, context: RunModelContext) -> ClaudeAgentOptions:
        """The application's options for this attempt.

        Raises:
            TypeError: The factory did not return `ClaudeAgentOptions`.
        """
        options: Any = self.definition.options
        if not isinstance(options, ClaudeAgentOptions):
            options = options(
                ClaudeAgentOptionsContext(
                    flow_id=context.session_id,
                    turn_id=context.turn_id,
                    attempt=context.attempt,
                )
            )
        if not isinstance(options, ClaudeAgentOptions):
            raise InvalidOptionError(
                "the Claude agent options factory returned "
                f"{type(options).__name__}; return `ClaudeAgentOptions`"
            )
        return options

    async def execute_deferred_tool(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> ToolOutcome:
        """Run a deferred custom tool, or record an approved CLI tool.

        Raises:
            ToolExecutionError: The arguments do not fit the tool's schema, the
                tool is gone, its result has `is_error`, or its handler returned
                something that is not a tool result; the model reads it.
        """
        if call.metadata.get("kind") == "cli":
            return ToolOutcome(
                output=APPROVED_CLI_TOOL_OUTPUT, finished_by_resumed_turn=True
            )
        if call.metadata.get("kind") == SOURCE_CALL_KIND:
            return await execute_source_call(
                self.definition.tool_sources, call, execution
            )
        tool = self._tools.get(call.tool_name)
        if tool is None:
            raise ToolExecutionError(
                f"{call.tool_name} did not run: this agent no longer has that tool."
            )
        problem = tool.validation_error(call.arguments)
        if problem is not None:
            raise ToolExecutionError(problem)
        token = set_current_deferred_tool_execution(execution)
        try:
            # A result of the wrong shape raises ToolExecutionError there: the
            # call ends failed, not retried (another attempt would run the
            # handler's effect again and return the same wrong shape).
            result = await run_handler(tool, dict(call.arguments))
        finally:
            reset_current_deferred_tool_execution(token)
        if result_is_error(result):
            raise ToolExecutionError(result_text(result))
        return await self._recorded_outcome(result)

    async def _recorded_outcome(self, result: dict[str, Any]) -> ToolOutcome:
        """The record of a handler's result: its text, and its images when there is a store.

        The images are uploaded here, in the tool Step, so a resumed segment
        replays the same references on any Worker. Without a store a record keeps
        text only, with a placeholder for each image.

        Raises:
            ValueError: An image is not valid base64 or the store refused it;
                the Step attempt fails rather than record a result the model
                would read differently.
        """
        store = self.definition.media_store
        if store is None:
            return ToolOutcome(output=result_text(result))
        parts: list[str] = []
        images: list[ImageReference] = []
        for block in result_content(result):
            data, media_type = block.get("data"), block.get("mimeType")
            if block.get("type") == "image" and isinstance(data, str):
                raw = base64.b64decode(data, validate=True)
                images.append(await store.put_image(raw, str(media_type)))
            elif block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                parts.append(f"[{block.get('type', 'unknown')} content omitted]")
        return ToolOutcome(output="\n".join(parts), images=tuple(images))

    async def check_edited_call(
        self, call: ToolCall, arguments: JsonObject, context: EditContext
    ) -> ToolCall:
        """`call` with a person's edit of its input, checked; see `_edits`.

        Raises:
            InvalidEditError: the edit does not fit the tool's schema, or the
                source or the application refuses it.
        """
        return await check_edited_call(
            self.definition, self._tools, call, arguments, context
        )

    def tool_call_step_options(self, call: ToolCall) -> ToolStepOptions:
        """The tool Step options of a source call: its source's; otherwise the session's."""
        name = call.metadata.get("source_name")
        for source in self.definition.tool_sources:
            if source.source_name == name:
                return source.tool_call_step_options(call.tool_name)
        return ToolStepOptions()

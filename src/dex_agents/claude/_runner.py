"""`ClaudeAgentRunner`: the Claude Agent SDK as a durable session's runner."""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import ClaudeAgentOptions

from .._errors import ToolExecutionError, UserError
from ..session import (
    DeferredToolExecution,
    JsonObject,
    RunModelContext,
    ToolCall,
    ToolCallsRequested,
    ToolOutcome,
    ToolPolicy,
    TurnCompleted,
    reset_current_deferred_tool_execution,
    resolve_policy,
    set_current_deferred_tool_execution,
)
from ._definition import ClaudeAgentDefinition, ClaudeAgentOptionsContext
from ._options import check_options
from ._segment import Segment, SegmentSetup
from ._tools import CustomTool, result_is_error, result_text
from ._transcript import USER_PROMPT_ITEM_KIND

APPROVED_CLI_TOOL_OUTPUT = (
    "Approved; the call runs inside the resumed Claude Code turn."
)
"""Record output of an approved tool that runs inside the CLI."""


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

    def build_user_message(self, text: str) -> JsonObject:
        """The stored item of a user message: `{"kind": "user_prompt", "text": ...}`."""
        return {"kind": USER_PROMPT_ITEM_KIND, "text": text}

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
        options = self.options_for(context)
        policies = {**self.definition.tool_policies, **context.tool_policies}
        server_name = self.definition.custom_tool_server_name

        def must_defer(name: str) -> bool:
            prefix = f"mcp__{server_name}__"
            if name in (f"mcp__{server_name}", f"{prefix}*"):
                return any(
                    self._defers(tool, policies, context)
                    for tool in self._tools.values()
                )
            if name.startswith(prefix):
                tool = self._tools.get(name.removeprefix(prefix))
                return tool is not None and self._defers(tool, policies, context)
            return resolve_policy(
                name, policies, context.default_tool_effect
            ).needs_approval

        check_options(options, server_name=server_name, must_defer=must_defer)
        setup = SegmentSetup(
            options=options,
            tools=self._tools,
            server_name=server_name,
            policies=policies,
            permission=self.definition.claude_code_tool_permission,
        )
        return await Segment(setup, context).run()

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
            raise TypeError(
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
                tool is gone, or its result has `is_error`; the model reads it.
        """
        if call.metadata.get("kind") == "cli":
            return ToolOutcome(
                output=APPROVED_CLI_TOOL_OUTPUT, finished_by_resumed_turn=True
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
            result = await tool.handler(dict(call.arguments))
        finally:
            reset_current_deferred_tool_execution(token)
        text = result_text(result)
        if result_is_error(result):
            raise ToolExecutionError(text)
        return ToolOutcome(output=text)

    @staticmethod
    def _defers(
        tool: CustomTool, policies: dict[str, ToolPolicy], context: RunModelContext
    ) -> bool:
        policy = tool.policy(policies, context.default_tool_effect)
        return policy.effect != "read" or policy.needs_approval

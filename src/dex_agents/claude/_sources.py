"""Tool sources in a Claude segment: listing, serving, and routing their calls.

The runner lists every source at the start of each RunModel attempt and serves
the listed tools from the custom tool server, after the custom tools. Listing
is the only source I/O inside the turn, so it is bounded: a source that fails or
takes longer than the listing timeout offers nothing in that attempt, and the
turn goes on with the other tools.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta

from .._errors import InvalidOptionError, SessionError, ToolExecutionError
from ..session import RunModelContext, ToolCall, ToolOutcome
from ..session._records import DeferredToolExecution
from ..session._tool_sources import (
    SourceQuestion,
    SourceTaskStarted,
    SourceTool,
    ToolSource,
    ToolSourceContext,
    ToolStepOptions,
)
from ._tools import CLAUDE_CODE_TOOL_NAMES, CustomTool

logger = logging.getLogger(__name__)

SOURCE_CALL_KIND = "source"
"""`ToolCall.metadata["kind"]` of a source tool call."""

VANISHED_TEXT = "its tool source does not offer this tool now"


def vanished_text(name: str) -> str:
    """What the model reads for a new call of a source tool no longer listed."""
    return f"{name} did not run: {VANISHED_TEXT}."


def source_one_reply_text(name: str) -> str:
    """What the model reads for a source call after another deferrable call of its reply."""
    return (
        f"{name} did not run: an earlier call of this reply runs first in its own "
        "step; read the earlier result first. Call again by itself."
    )


async def _listing(
    source: ToolSource, context: ToolSourceContext, timeout: timedelta
) -> Sequence[SourceTool]:
    try:
        async with asyncio.timeout(timeout.total_seconds()):
            return list(await source.list_tools(context))
    except Exception as e:
        # A listing failure must not fail the turn: the source offers nothing now.
        logger.warning(
            "tool source %r offered no tools in this attempt: %s",
            source.source_name,
            e or type(e).__name__,
        )
        return []


async def segment_tools(
    *,
    context: RunModelContext,
    custom: Mapping[str, CustomTool],
    sources: Sequence[ToolSource],
    timeout: timedelta,
) -> dict[str, CustomTool]:
    """The tools a segment serves: custom tools, then each source's listed tools.

    A resumed segment's deferred source call whose tool the listing lacks is
    served too, replay-only, so the CLI receives its recorded result.

    Raises:
        TypeError: A listed name repeats a custom tool, a Claude Code tool, or
            another source's tool; the attempt fails.
    """
    tools = dict(custom)
    if not sources:
        return tools
    source_context = ToolSourceContext(
        session_id=context.session_id, turn_id=context.turn_id, attempt=context.attempt
    )
    listings = await asyncio.gather(
        *(_listing(source, source_context, timeout) for source in sources)
    )
    owners: dict[str, str] = {}
    for source, listed in zip(sources, listings, strict=True):
        for tool in listed:
            name = tool.name
            if (
                name in custom
                or name in CLAUDE_CODE_TOOL_NAMES
                or name.startswith("mcp__")
            ):
                raise InvalidOptionError(
                    f"tool source {source.source_name!r} lists {name!r}, which is a "
                    "custom or Claude Code tool name; policies and records name tools bare"
                )
            if name in owners:
                raise InvalidOptionError(
                    f"tool sources {owners[name]!r} and {source.source_name!r} both "
                    f"list {name!r}; policies and records name tools bare"
                )
            owners[name] = source.source_name
            tools[name] = CustomTool.from_source(source, tool)
    resume = context.resume
    if resume is not None:
        for record in resume.records:
            if record.tool_name not in tools and _is_served_name(record.tool_name):
                # A vanished source tool (or a custom tool removed since): serve
                # it so the resumed call reads its record; new calls are denied.
                tools[record.tool_name] = CustomTool.from_source(
                    _VANISHED,
                    SourceTool(
                        name=record.tool_name,
                        description="No longer offered.",
                        input_schema={"type": "object"},
                    ),
                    replay_only=True,
                )
    return tools


def _is_served_name(name: str) -> bool:
    return (
        bool(name)
        and not name.startswith("mcp__")
        and name not in CLAUDE_CODE_TOOL_NAMES
    )


class _VanishedSource:
    """Stands in for the source of a replay-only tool; it never runs a call."""

    source_name = ""
    declared_tool_names: Sequence[str] = ()

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        del context
        return []

    async def build_call(self, tool_name: str, arguments: object) -> object:
        raise ToolExecutionError(vanished_text(tool_name))

    async def execute_deferred_tool_call(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> ToolOutcome:
        del execution
        raise ToolExecutionError(vanished_text(call.tool_name))

    def tool_call_step_options(self, tool_name: str) -> ToolStepOptions:
        del tool_name
        return ToolStepOptions()


_VANISHED: ToolSource = _VanishedSource()  # pyright: ignore[reportAssignmentType]


def step_fields(source: ToolSource, tool_name: str) -> dict[str, float | int | None]:
    """`ToolCall` fields that carry the source's tool Step options to the workflow."""
    options = source.tool_call_step_options(tool_name)
    return {
        "step_timeout_seconds": None
        if options.timeout is None
        else options.timeout.total_seconds(),
        "step_attempts": options.attempts,
    }


async def execute_source_call(
    sources: Sequence[ToolSource], call: ToolCall, execution: DeferredToolExecution
) -> ToolOutcome:
    """Run a deferred source call in its tool Step through its source.

    Runners poll no tasks and ask no questions: a started task records failed
    for a read and outcome_unknown otherwise; a question records failed.

    Raises:
        ToolExecutionError: The source is gone, the call failed, it is a read
            that started a task, or it asked a question.
        SessionError: A write started a task (not retryable: outcome_unknown).
    """
    name = call.metadata.get("source_name")
    source = next((s for s in sources if s.source_name == name), None)
    if source is None:
        raise ToolExecutionError(
            f"{call.tool_name} did not run: this agent no longer has its tool source."
        )
    result = await source.execute_deferred_tool_call(call, execution)
    match result:
        case SourceQuestion(question=question):
            raise ToolExecutionError(
                f"{call.tool_name} asked a question the session cannot ask: {question}"
            )
        case SourceTaskStarted(task_id=task_id):
            text = f"{call.tool_name} started task {task_id}, which the session does not poll"
            if call.policy.effect == "read":
                raise ToolExecutionError(text)
            raise SessionError(text, retryable=False)
        case ToolOutcome():
            return result

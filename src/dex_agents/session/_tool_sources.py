"""Tool sources: tools that an outside provider offers, listed per model attempt.

A custom tool is code the application hands the adapter; a tool source is a
provider (a connector of reviewed operations, an MCP server) whose tools the
runner asks for in every RunModel attempt, because the set may change between
attempts. The runner serves a listed tool to the model, and then:

- every call defers to its own tool Step, reads included, because the source
  derives its call ID from the Step execution ID (so a retry reuses it);
- the source builds the call from the final input (`build_call`) and so decides
  the effect class and approval; a session policy may only change approval;
- the tool Step runs it through `execute_deferred_tool_call`, with the options
  of `tool_call_step_options` (timeout and attempts);
- a call never runs inside the model segment, so its record is the only truth.

This module is engine-free: sources never see Temporal, only the records here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, Protocol, runtime_checkable

from .._errors import InvalidOptionError
from ._json import JsonObject
from ._policy import ToolPolicy
from ._records import DeferredToolExecution, ToolCall, ToolOutcome


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSourceContext:
    """Which RunModel attempt a source lists its tools for."""

    session_id: str
    turn_id: str
    attempt: int


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceTool:
    """One tool a source offers: what the model sees of it."""

    name: str
    """The bare name; policies, interrupts and records use it."""
    description: str
    input_schema: JsonObject
    """The JSON Schema of the tool's input."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceCall:
    """A call as its source classified it from the final input.

    The source, not the application, decides `policy.effect`: it knows whether
    the operation reads, and whether a retry is safe.
    """

    tool_name: str
    arguments: JsonObject
    """The input the call runs with (validated, maybe normalized by the source)."""
    policy: ToolPolicy
    reason: str = ""
    """Why the call needs approval, shown with its interrupt."""
    metadata: JsonObject = field(default_factory=lambda: {})
    """Source-owned facts the tool Step gets back in `ToolCall.metadata["source"]`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolStepOptions:
    """The tool Step options of one source tool; None keeps the session's."""

    timeout: timedelta | None = None
    attempts: int | None = None
    """Attempts of a retried (`call_tool`) Step; a single-attempt Step stays at 1."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceTaskStarted:
    """A source call that started a long-running task instead of answering.

    Runners poll no tool tasks: the call records failed for a read (nothing
    happened that matters) and outcome_unknown otherwise (the task may write).
    """

    kind: Literal["task_started"] = "task_started"
    task_id: str
    """The provider's task handle, quoted in the record."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceQuestion:
    """A source call that asks the user a question; runners ask none, so it records failed."""

    kind: Literal["question"] = "question"
    question: str


SourceCallResult = ToolOutcome | SourceTaskStarted | SourceQuestion
"""What `execute_deferred_tool_call` returns."""


class SourceCallRefused(Exception):
    """Raised by `build_call` for input the source will not run, such as bad arguments.

    The runner denies the call inside the turn with this message: the call never
    reaches its tool Step, so it never reaches the provider.
    """


@runtime_checkable
class ToolSource(Protocol):
    """A provider of tools that the runner lists in each RunModel attempt.

    Contract:

    - `source_name` is unique among an agent's sources;
    - `declared_tool_names` are the names the source may ever list, checked for
      collisions when the agent is defined (a dynamic source may declare none;
      its listing is checked in each attempt instead);
    - `list_tools` may fail or hang: the runner then offers none of its tools in
      that attempt, and a deferred call of a vanished tool still replays;
    - `build_call` must not do I/O with side effects: it runs inside the turn;
    - `execute_deferred_tool_call` runs in a tool Step, maybe several times
      under one `execution.step_execution_id`; derive provider call IDs from it.
    """

    @property
    def source_name(self) -> str:
        """The source's unique name."""
        ...

    @property
    def declared_tool_names(self) -> Sequence[str]:
        """Names the source may list, for the definition-time collision check."""
        ...

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        """The tools offered in this attempt."""
        ...

    async def build_call(self, tool_name: str, arguments: JsonObject) -> SourceCall:
        """Classify a call from its final input.

        Raises:
            SourceCallRefused: The input cannot run; the model reads the message.
        """
        ...

    async def execute_deferred_tool_call(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> SourceCallResult:
        """Run `call` in its tool Step.

        Raise `ToolExecutionError` for a failed result the model reads, a
        `SessionError(retryable=False)` for an outcome that is not known, and
        anything else to fail the attempt (retried when the Step retries).
        """
        ...

    def tool_call_step_options(self, tool_name: str) -> ToolStepOptions:
        """The tool Step's timeout and attempts for calls of `tool_name`."""
        ...


def check_tool_source_names(
    sources: Sequence[ToolSource], reserved: Sequence[str] = ()
) -> None:
    """Refuse sources whose names would make a policy or record ambiguous.

    Args:
        sources: The agent's sources, with their declared tool names.
        reserved: Names taken already (custom tools, the framework's own tools).

    Raises:
        TypeError: Two sources share a name, or a declared tool name repeats a
            reserved name or another source's tool.
    """
    taken = set(reserved)
    owners: dict[str, str] = {}
    names: set[str] = set()
    for source in sources:
        name = source.source_name
        if name in names:
            raise InvalidOptionError(f"two tool sources are named {name!r}; rename one")
        names.add(name)
        for tool in source.declared_tool_names:
            if tool in taken:
                raise InvalidOptionError(
                    f"tool source {name!r} declares {tool!r}, which is already a "
                    "custom or built-in tool; policies and records name tools bare"
                )
            if tool in owners:
                raise InvalidOptionError(
                    f"tool sources {owners[tool]!r} and {name!r} both declare "
                    f"{tool!r}; policies and records name tools bare"
                )
            owners[tool] = name


def source_call_policy(
    call: SourceCall, session_policy: ToolPolicy | None
) -> ToolPolicy:
    """The policy a source call runs under: the source's effect, maybe other approval.

    A session policy for a source tool changes only whether the call waits for
    approval (its `needs_approval`); the effect stays the source's, because the
    source knows whether a retry is safe.
    """
    if session_policy is None:
        return call.policy
    return ToolPolicy(
        effect=call.policy.effect, requires_approval=session_policy.needs_approval
    )

"""`ConnectorToolSource`: connector tools as a session tool source."""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import InvalidOptionError, SessionError, ToolExecutionError
from ..session import ToolCall, ToolOutcome, ToolPolicy
from ..session._json import JsonObject
from ..session._records import DeferredToolExecution
from ..session._tool_sources import (
    SourceCall,
    SourceCallRefused,
    SourceCallResult,
    SourceQuestion,
    SourceTaskStarted,
    SourceTool,
    ToolSourceContext,
    ToolStepOptions,
)
from ._model import (
    ConnectorError,
    ConnectorFence,
    ConnectorInvocation,
    ConnectorOutcomeUnknown,
    ConnectorTool,
    connector_call_id,
    result_text,
)

DEFAULT_CONNECTOR_SOURCE_NAME = "connectors"


class ConnectorToolSource:
    """Offers the exposed tools of `tools`; the manifest of each decides effect and approval.

    Its listing is static, so its declared names are exactly what it lists, and
    the agent's definition can refuse collisions up front.

    Raises:
        TypeError: Two tools share a name.
    """

    def __init__(
        self,
        tools: Sequence[ConnectorTool],
        *,
        source_name: str = DEFAULT_CONNECTOR_SOURCE_NAME,
    ) -> None:
        self._name = source_name
        self._tools: dict[str, ConnectorTool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise InvalidOptionError(f"two connector tools are named {tool.name!r}")
            self._tools[tool.name] = tool

    @property
    def source_name(self) -> str:
        """The source's name, unique among an agent's sources."""
        return self._name

    @property
    def declared_tool_names(self) -> Sequence[str]:
        """The exposed tools' names; an operation the manifest hides is not offered."""
        return [t.name for t in self._tools.values() if t.exposed]

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        """The exposed tools, in the order given."""
        del context  # A connector's tools do not change per attempt.
        return [
            SourceTool(
                name=t.name,
                description=t.operation.description,
                input_schema=t.operation.input_schema,
            )
            for t in self._tools.values()
            if t.exposed
        ]

    def _tool(self, tool_name: str) -> ConnectorTool | None:
        tool = self._tools.get(tool_name)
        return tool if tool is not None and tool.exposed else None

    async def build_call(self, tool_name: str, arguments: JsonObject) -> SourceCall:
        """Classify a call from its final input: effect from the operation, approval from the manifest.

        Raises:
            SourceCallRefused: The tool is not offered or the input does not fit,
                so the call never reaches the provider.
        """
        tool = self._tool(tool_name)
        if tool is None:
            raise SourceCallRefused(
                f"{tool_name} is not an exposed connector operation"
            )
        try:
            tool.validate(arguments)
        except ValueError as e:
            raise SourceCallRefused(str(e)) from e
        approval = tool.needs_approval(arguments)
        operation = tool.operation
        return SourceCall(
            tool_name=tool_name,
            arguments=dict(arguments),
            policy=ToolPolicy(effect=operation.effect, requires_approval=approval),
            reason=(
                f"{tool_name} is a connector {operation.kind} and needs approval"
                if approval
                else ""
            ),
            metadata={"reference": tool.reference, "operation": operation.name},
        )

    async def execute_deferred_tool_call(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> SourceCallResult:
        """Invoke the operation under the call ID derived from the Step execution ID.

        Before invoking, the attempt keeps a `ConnectorFence` in the Step's
        heartbeat checkpoint; the next attempt hands it to the operation as
        `earlier_fence`, and a mutation that is not retry-safe that finds one
        records outcome_unknown instead of running again.

        Raises:
            ToolExecutionError: The tool is gone, the input does not fit, or the
                provider failed the call for certain.
            SessionError: The provider's outcome is unknown (not retryable).
        """
        tool = self._tool(call.tool_name)
        if tool is None:
            raise ToolExecutionError(
                f"{call.tool_name} did not run: the connector no longer offers it."
            )
        try:
            tool.validate(call.arguments)
        except ValueError as e:
            raise ToolExecutionError(str(e)) from e
        operation = tool.operation
        call_id = connector_call_id(execution)
        earlier = ConnectorFence.from_checkpoint(execution.heartbeat_checkpoint)
        if earlier is not None and earlier.call_id != call_id:
            earlier = None  # Another call's marker says nothing about this one.
        if earlier is not None and operation.effect == "non_idempotent_write":
            # Only reachable when the Step was given more than one attempt: the
            # earlier attempt may have written, and a second run could write twice.
            raise SessionError(
                f"{call.tool_name} outcome unknown: attempt {earlier.attempt} began "
                f"invoking it under call ID {call_id} and did not finish",
                retryable=False,
            )
        fence = ConnectorFence(
            call_id=call_id, operation=operation.name, attempt=execution.attempt
        )
        execution.record_heartbeat_checkpoint(fence.to_checkpoint())
        invocation = ConnectorInvocation(
            reference=tool.reference,
            operation=operation.name,
            arguments=dict(call.arguments),
            call_id=call_id,
            attempt=execution.attempt,
            earlier_fence=earlier,
        )
        try:
            result = await tool.operation.invoke(invocation)
        except ConnectorError as e:
            raise ToolExecutionError(str(e) or type(e).__name__) from e
        except ConnectorOutcomeUnknown as e:
            raise SessionError(
                f"{call.tool_name} outcome unknown: {e}", retryable=False
            ) from e
        if isinstance(result, SourceTaskStarted | SourceQuestion):
            return result
        return ToolOutcome(output=result_text(result))

    def tool_call_step_options(self, tool_name: str) -> ToolStepOptions:
        """The operation's timeout, and its attempts when a retry is safe."""
        tool = self._tools.get(tool_name)
        if tool is None:
            return ToolStepOptions()
        operation = tool.operation
        retried = operation.kind == "query" or operation.retry == "safe"
        return ToolStepOptions(
            timeout=operation.timeout,
            attempts=operation.attempts if retried else None,
        )

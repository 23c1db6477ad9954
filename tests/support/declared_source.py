"""A real, minimal tool source that declares one tool and is never listed or called.

Definition checks read a source's `declared_tool_names` only, so this is all
they need of one.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents.session._json import JsonObject
from dex_agents.session._records import ToolCall
from dex_agents.session._tool_sources import (
    DeferredToolExecution,
    SourceCall,
    SourceCallResult,
    SourceTool,
    ToolSourceContext,
    ToolStepOptions,
)


class DeclaredSource:
    """The `ledger` source, declaring `append_entry`."""

    source_name = "ledger"

    @property
    def declared_tool_names(self) -> Sequence[str]:
        return ["append_entry"]

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        return []

    async def build_call(self, tool_name: str, arguments: JsonObject) -> SourceCall:
        raise NotImplementedError

    async def execute_deferred_tool_call(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> SourceCallResult:
        raise NotImplementedError

    def tool_call_step_options(self, tool_name: str) -> ToolStepOptions:
        return ToolStepOptions()

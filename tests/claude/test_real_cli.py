"""The adapter against the real bundled Claude Code CLI and the scripted Messages API."""

from typing import Any

from claude_agent_sdk import SdkMcpTool, ToolAnnotations, tool
from claude_harness import SessionDriver
from conftest import Hermetic

from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentRunner,
    current_deferred_tool_execution,
)
from dex_agents.session import DeferredToolExecution, ToolPolicy


class Ledger:
    """Counts tool runs and what they saw."""

    def __init__(self) -> None:
        self.lookups: list[dict[str, Any]] = []
        self.refunds: list[dict[str, Any]] = []
        self.executions: list[DeferredToolExecution | None] = []

    def tools(self) -> list[SdkMcpTool[Any]]:
        @tool(
            "lookup_order",
            "Look up an order",
            {"orderId": str},
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        async def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
            self.lookups.append(args)
            return {"content": [{"type": "text", "text": f"order {args['orderId']}: broken"}]}

        @tool("create_refund", "Refund an order", {"orderId": str})
        async def create_refund(args: dict[str, Any]) -> dict[str, Any]:
            self.refunds.append(args)
            self.executions.append(current_deferred_tool_execution())
            return {"content": [{"type": "text", "text": f"refunded {args['orderId']}"}]}

        return [lookup_order, create_refund]


def runner_for(hermetic: Hermetic, ledger: Ledger, **options: object) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=hermetic.options(**options),
            custom_tools=ledger.tools(),
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        )
    )


async def test_read_tool_inline_then_second_turn_resumes(hermetic: Hermetic) -> None:
    ledger = Ledger()
    driver = SessionDriver(runner_for(hermetic, ledger))
    first = await driver.turn('dex-script: call lookup_order {"orderId": "7"}')
    assert first.text == "done: order 7: broken"
    assert len(first.segments) == 1
    assert ledger.lookups == [{"orderId": "7"}]
    second = await driver.turn("dex-script: recall")
    assert 'call lookup_order {"orderId": "7"}' in second.text
    assert ledger.lookups == [{"orderId": "7"}]


async def test_approved_write_resumes_without_prompt(hermetic: Hermetic) -> None:
    ledger = Ledger()
    driver = SessionDriver(runner_for(hermetic, ledger))
    result = await driver.turn('dex-script: call create_refund {"orderId": "7"}')
    assert result.text == "done: refunded 7"
    assert ledger.refunds == [{"orderId": "7"}]
    [execution] = ledger.executions
    assert execution is not None
    assert execution.idempotency_key.startswith("session-1/turn-1/toolu_")

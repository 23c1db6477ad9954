"""Usage and model-call metadata of one segment, from what the CLI reports.

`ResultMessage.usage` covers the segment alone, but on a resumed Claude session
CLI 2.1.327 reports `model_usage` and `total_cost_usd` cumulatively for the whole
session, restored from the transcript's last `cost-state` entry. The segment's
cost is therefore the difference against that entry. The metadata follows the
specification's Tracing rules: only what the CLI reports, each field only when
it is unambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from claude_agent_sdk import (
    AssistantMessage,
    Message,
    ResultMessage,
    StreamEvent,
    SystemMessage,
)

from ..session._json import JsonObject
from ..session._usage import ModelCallMetadata, Usage

_PROVIDER_NAMES = {
    "firstParty": "anthropic",
    "bedrock": "aws.bedrock",
    "mantle": "aws.bedrock",
    "vertex": "gcp.vertex_ai",
}
_NO_PROVIDER = frozenset({"gateway"})
"""An enterprise gateway relays to a backend the CLI does not name."""


def provider_name(provider: str | None) -> str | None:
    """The tracing provider name for a CLI `modelUsage` provider, if any.

    Values without an unambiguous well-known name (`foundry`, `anthropicAws`,
    ...) pass through unchanged; `gateway` and a missing value give None.
    """
    if provider is None or provider in _NO_PROVIDER:
        return None
    return _PROVIDER_NAMES.get(provider, provider)


def cumulative_cost(entries: Sequence[JsonObject]) -> float:
    """The session's total cost as of the last `cost-state` entry, else 0."""
    for entry in reversed(entries):
        if entry.get("type") == "cost-state":
            value = entry.get("totalCostUSD")
            if isinstance(value, int | float):
                return float(value)
    return 0.0


class SegmentObserver:
    """Watches a segment's messages for the facts usage and metadata need."""

    def __init__(self) -> None:
        self.init_model: str | None = None
        self.key_source: object = None
        """Where the CLI took its credentials from (`init`'s `apiKeySource`)."""
        self._message_ids: list[str] = []
        self._models: set[str] = set()
        self._subagent_calls = False
        self._finish_reasons: list[str] = []
        self._unnamed_calls = 0

    def observe(self, message: Message) -> None:
        """Record what `message` says about the segment's model calls."""
        match message:
            case SystemMessage(subtype="init", data=data):
                model = data.get("model")
                if isinstance(model, str) and self.init_model is None:
                    self.init_model = model
                self.key_source = data.get("apiKeySource")
            case AssistantMessage():
                self._models.add(message.model)
                if message.parent_tool_use_id is not None:
                    self._subagent_calls = True
                if message.message_id is None:
                    self._unnamed_calls += 1
                elif message.message_id not in self._message_ids:
                    self._message_ids.append(message.message_id)
            case StreamEvent(event=event, parent_tool_use_id=None):
                if event.get("type") == "message_delta":
                    delta: Any = event.get("delta") or {}
                    reason = (
                        cast(dict[str, Any], delta).get("stop_reason")
                        if isinstance(delta, dict)
                        else None
                    )
                    if isinstance(reason, str):
                        self._finish_reasons.append(reason)
            case _:
                pass

    @property
    def model_calls(self) -> int:
        """Distinct assistant API messages of the segment, subagents included."""
        return len(self._message_ids) + self._unnamed_calls

    def usage(self, result: ResultMessage, previous_cost: float) -> Usage:
        """The segment's usage; `previous_cost` is the session's cost before it."""
        raw: dict[str, Any] = result.usage or {}
        cache_reads = _int(raw.get("cache_read_input_tokens"))
        cache_writes = _int(raw.get("cache_creation_input_tokens"))
        total_cost = result.total_cost_usd or 0.0
        return Usage(
            input_tokens=_int(raw.get("input_tokens")) + cache_reads + cache_writes,
            output_tokens=_int(raw.get("output_tokens")),
            cached_input_tokens=cache_reads,
            # The result does not report reasoning tokens separately.
            reasoning_tokens=0,
            model_calls=self.model_calls,
            cost_usd=max(0.0, total_cost - previous_cost),
        )

    def metadata(
        self, result: ResultMessage, options_model: str | None
    ) -> ModelCallMetadata:
        """ModelCallMetadata with only what the CLI reported, per the Tracing rules."""
        request_model: str | None = None
        provider: str | None = None
        if not self._subagent_calls:
            request_model = self.init_model or options_model
            if request_model is not None:
                usage = (result.model_usage or {}).get(request_model)
                raw_provider = None if usage is None else usage.get("provider")
                provider = provider_name(raw_provider)
        single = self.model_calls == 1
        return ModelCallMetadata(
            request_model=request_model,
            response_model=next(iter(self._models)) if len(self._models) == 1 else None,
            provider_name=provider,
            response_id=self._message_ids[0]
            if single and len(self._message_ids) == 1
            else None,
            finish_reasons=tuple(self._finish_reasons[-1:])
            if single and self._finish_reasons
            else None,
        )


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0

"""Token and cost accounting per segment and per session."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Usage of one segment, a turn, or a whole session.

    `input_tokens` include cache reads and writes; `cached_input_tokens` are the
    cache reads among them.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    model_calls: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            model_calls=self.model_calls + other.model_calls,
            cost_usd=self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCallMetadata:
    """What the framework reports about the model calls of one segment; unset when unknown."""

    request_model: str | None = None
    response_model: str | None = None
    provider_name: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] | None = None

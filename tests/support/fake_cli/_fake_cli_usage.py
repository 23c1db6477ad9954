"""Models, token counts and costs as the fake Claude CLI reports them.

Observed with CLI 2.1.327 against the scripted Messages API: the init message and
`modelUsage` name the requested model after alias resolution (`opus` is
`claude-opus-5-5`, also the default), `usage` covers the segment's main
conversation only, while `modelUsage` and `total_cost_usd` are cumulative for
the session, subagents included, and a resumed process restores them from the
transcript's last `cost-state` entry. A model the process never called keeps the
restored fields only (no `provider`), as in results without a model call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._fake_cli_args import JsonObject

CLI_VERSION = "2.1.332"
"""The CLI whose behavior the fake copies; reported in init and transcripts."""

DEFAULT_MODEL = "claude-opus-5-5"
SUBAGENT_MODEL = "claude-haiku-5-5"
"""Subagents answer with another model, so a segment with one names two."""

INPUT_TOKENS = 20
"""Input tokens of every scripted model call, as the mock Messages API reports."""

_ALIASES = {
    "default": DEFAULT_MODEL,
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-5-5",
}
_RESPONSE_DATE = "20261001"


def resolve_model(requested: str | None) -> str:
    """The model the CLI requests for `--model`, after its aliases and default."""
    if not requested:
        return DEFAULT_MODEL
    return _ALIASES.get(requested, requested)


def response_model(model: str) -> str:
    """The dated model name an answer carries, e.g. `claude-opus-5-5-20261001`."""
    return model if re.search(r"-\d{8}$", model) else f"{model}-{_RESPONSE_DATE}"


def output_tokens(produced: str) -> int:
    """Output tokens of an answer, the mock Messages API's rough count."""
    return max(1, len(produced) // 4)


def _prices(model: str) -> tuple[float, float]:
    """USD per input and output token; CLI 2.1.327 lists Opus 5.5 at $4/$20."""
    if "opus" in model:
        return 4e-6, 20e-6
    if "haiku" in model:
        return 1e-6, 5e-6
    return 3e-6, 15e-6


def _limits(model: str) -> tuple[int, int]:
    return (1_000_000, 128_000) if "opus" in model else (200_000, 64_000)


@dataclass(kw_only=True, slots=True)
class _Totals:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, input_tokens: int, output_tokens: int, cost: float) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost_usd += cost


class UsageLedger:
    """Usage of one CLI process, on top of what earlier processes recorded."""

    def __init__(self) -> None:
        self._session: dict[str, _Totals] = {}
        self._since_result: dict[str, _Totals] = {}
        self._called: set[str] = set()
        self._segment = _Totals()
        self._restored_cost = 0.0

    def restore(self, cost_state: JsonObject) -> None:
        """Start from the totals of a transcript's last `cost-state` entry."""
        cost = cost_state.get("totalCostUSD")
        self._restored_cost = float(cost) if isinstance(cost, int | float) else 0.0
        usage = cost_state.get("modelUsage")
        if not isinstance(usage, dict):
            return
        for model, entry in usage.items():
            if isinstance(entry, dict):
                self._session[model] = _Totals(
                    input_tokens=_int(entry.get("inputTokens")),
                    output_tokens=_int(entry.get("outputTokens")),
                    cost_usd=_float(entry.get("costUSD")),
                )

    def record(self, model: str, output: int, *, main: bool) -> None:
        """Count one model call; `main` is False for a subagent's call."""
        price_in, price_out = _prices(model)
        cost = INPUT_TOKENS * price_in + output * price_out
        self._session.setdefault(model, _Totals()).add(INPUT_TOKENS, output, cost)
        self._since_result.setdefault(model, _Totals()).add(INPUT_TOKENS, output, cost)
        self._called.add(model)
        if main:
            self._segment.add(INPUT_TOKENS, output, cost)

    @property
    def total_cost_usd(self) -> float:
        """Session cost so far, restored cost included."""
        return sum(t.cost_usd for t in self._session.values()) or self._restored_cost

    def result_fields(self) -> JsonObject:
        """The usage fields of a result frame; starts the next segment's count."""
        fields: JsonObject = {
            "total_cost_usd": self.total_cost_usd,
            "usage": _usage(self._segment),
            "modelUsage": {
                m: self._model_usage(m, t) for m, t in self._session.items()
            },
            "model_usage_since_last_result": {
                m: self._model_usage(m, t) for m, t in self._since_result.items()
            },
        }
        self._segment = _Totals()
        self._since_result = {}
        return fields

    def cost_state(self, session_id: str, start_time_ms: int) -> JsonObject:
        """The `cost-state` entry CLI 2.1.327 writes when stdin closes."""
        return {
            "type": "cost-state",
            "sessionId": session_id,
            "totalCostUSD": self.total_cost_usd,
            "totalAPIDuration": 0,
            "totalAPIDurationWithoutRetries": 0,
            "totalToolDuration": 0,
            "totalLinesAdded": 0,
            "totalLinesRemoved": 0,
            "totalDuration": 0,
            "startTime": start_time_ms,
            "modelUsage": {m: _state_usage(t) for m, t in self._session.items()},
            "hasUnknownModelCost": False,
        }

    def _model_usage(self, model: str, totals: _Totals) -> JsonObject:
        usage = _state_usage(totals)
        if model in self._called:
            context_window, max_output = _limits(model)
            usage |= {
                "contextWindow": context_window,
                "maxOutputTokens": max_output,
                "canonicalModel": model,
                "provider": "firstParty",
                "costBasis": "list",
            }
        return usage


def _state_usage(totals: _Totals) -> JsonObject:
    return {
        "inputTokens": totals.input_tokens,
        "outputTokens": totals.output_tokens,
        "thinkingTokens": 0,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0,
        "cacheCreationEphemeral5mInputTokens": 0,
        "cacheCreationEphemeral1hInputTokens": 0,
        "webSearchRequests": 0,
        "costUSD": totals.cost_usd,
    }


def _usage(totals: _Totals) -> JsonObject:
    return {
        "input_tokens": totals.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": totals.output_tokens,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {
            "ephemeral_1h_input_tokens": 0,
            "ephemeral_5m_input_tokens": 0,
        },
    }


def message_usage(output: int) -> JsonObject:
    """The `usage` of one API message (stream frames carry output 1, as streamed)."""
    return {
        "input_tokens": INPUT_TOKENS,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0

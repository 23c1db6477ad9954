from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
)

from dex_agents.claude._usage import SegmentObserver, cumulative_cost, provider_name
from dex_agents.session._usage import ModelCallMetadata, Usage
from support.claude_steps import fallback_segment


def result(**overrides: Any) -> ResultMessage:
    values: dict[str, Any] = {
        "subtype": "success",
        "duration_ms": 1,
        "duration_api_ms": 1,
        "is_error": False,
        "num_turns": 1,
        "session_id": "s",
        "total_cost_usd": 0.5,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
        "model_usage": {"opus": {"provider": "firstParty"}},
    }
    values.update(overrides)
    return ResultMessage(**values)


def assistant(
    message_id: str | None, model: str = "opus-dated", parent: str | None = None
) -> AssistantMessage:
    return AssistantMessage(
        content=[TextBlock(text="x")],
        model=model,
        message_id=message_id,
        parent_tool_use_id=parent,
    )


def delta(reason: str, parent: str | None = None) -> StreamEvent:
    return StreamEvent(
        uuid="u",
        session_id="s",
        parent_tool_use_id=parent,
        event={"type": "message_delta", "delta": {"stop_reason": reason}},
    )


def observe(*messages: Any) -> SegmentObserver:
    observer = SegmentObserver()
    for message in (SystemMessage(subtype="init", data={"model": "opus"}), *messages):
        observer.observe(message)
    return observer


def test_usage_counts_cache_and_differs_cost() -> None:
    observer = observe(assistant("m1"), assistant("m1"), assistant("m2"))
    assert observer.usage(result(), previous_cost=0.2) == Usage(
        input_tokens=130,
        output_tokens=5,
        cached_input_tokens=100,
        reasoning_tokens=0,
        model_calls=2,
        # approx compares equal to the float it stands for.
        cost_usd=pytest.approx(0.3),  # pyright: ignore[reportArgumentType]
    )
    assert observer.usage(
        result(total_cost_usd=None, usage=None), previous_cost=0.2
    ) == Usage(model_calls=2)


def test_cumulative_cost_is_the_last_cost_state() -> None:
    entries: list[Any] = [
        {"type": "cost-state", "totalCostUSD": 0.1},
        {"type": "user"},
        {"type": "cost-state", "totalCostUSD": 0.3},
        {"type": "assistant"},
    ]
    assert cumulative_cost(entries) == 0.3
    assert cumulative_cost([]) == 0.0
    assert cumulative_cost([{"type": "cost-state"}]) == 0.0


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("firstParty", "anthropic"),
        ("bedrock", "aws.bedrock"),
        ("mantle", "aws.bedrock"),
        ("vertex", "gcp.vertex_ai"),
        ("foundry", "foundry"),
        ("anthropicAws", "anthropicAws"),
        ("gateway", None),
        (None, None),
    ],
)
def test_provider_mapping(provider: str | None, name: str | None) -> None:
    assert provider_name(provider) == name


def test_one_call_metadata() -> None:
    observer = observe(assistant("m1"), delta("end_turn"), delta("sub", parent="t"))
    assert observer.metadata(result(), "alias") == ModelCallMetadata(
        request_model="opus",
        response_model="opus-dated",
        provider_name="anthropic",
        response_id="m1",
        finish_reasons=("end_turn",),
    )


def test_several_calls_omit_per_call_fields() -> None:
    observer = observe(
        assistant("m1"), delta("tool_use"), assistant("m2"), delta("end_turn")
    )
    assert observer.metadata(result(), None) == ModelCallMetadata(
        request_model="opus", response_model="opus-dated", provider_name="anthropic"
    )


def test_subagent_calls_drop_request_model_and_provider() -> None:
    observer = observe(assistant("m1"), assistant("m2", model="haiku", parent="t1"))
    assert observer.model_calls == 2
    assert observer.metadata(result(), None) == ModelCallMetadata()


def test_without_init_the_options_model_is_requested() -> None:
    observer = SegmentObserver()
    observer.observe(assistant(None))
    meta = observer.metadata(
        result(model_usage={"sonnet": {"provider": "gateway"}}), "sonnet"
    )
    assert meta == ModelCallMetadata(
        request_model="sonnet", response_model="opus-dated"
    )
    assert observer.model_calls == 1
    assert SegmentObserver().metadata(result(), None) == ModelCallMetadata()


def test_row156_after_a_fallback_one_answering_model_is_the_response_model() -> None:
    """Row 156: the init model is requested; every answer came from the fallback
    model, so the response model names it."""
    observer, result = fallback_segment(first_answer_model="claude-sonnet-fallback")
    assert observer.metadata(result, "opus") == ModelCallMetadata(
        request_model="claude-opus",
        response_model="claude-sonnet-fallback",
        provider_name="anthropic",
    )

"""A chat span per RunModel attempt, with only the metadata the runner reported."""

from __future__ import annotations

from opentelemetry.trace import SpanKind, StatusCode

from dex_agents.otel._spans import chat_span_attributes
from dex_agents.session._usage import ModelCallMetadata, Usage
from support.session_harness import Harness
from support.tracing_support import span_exporter


async def test_one_span_per_attempt_client_with_usage(harness: Harness) -> None:
    exporter = span_exporter()
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message="fail_once")
    await harness.sessions.wait_for_idle(sid)
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("dex_agents.session_id") == sid
    ]
    assert [s.attributes and s.attributes["dex_agents.attempt"] for s in spans] == [
        1,
        2,
    ]
    failed, ok = spans
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.kind == SpanKind.INTERNAL
    assert ok.name == "chat scripted"
    assert ok.kind == SpanKind.CLIENT
    assert ok.attributes is not None
    assert ok.attributes["gen_ai.usage.input_tokens"] == 20
    assert ok.attributes["gen_ai.request.model"] == "scripted"
    assert "gen_ai.provider.name" not in ok.attributes


def test_several_model_calls_make_an_internal_span_without_usage() -> None:
    client, attributes = chat_span_attributes(
        ModelCallMetadata(request_model="m", provider_name="anthropic"),
        Usage(input_tokens=5, output_tokens=1, model_calls=2),
    )
    assert not client
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.provider.name": "anthropic",
    }

"""The chat span of one RunModel attempt: its attributes, and its emission."""

from __future__ import annotations

from collections.abc import Mapping

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        '`dex_agents.otel` needs the `otel` extra: pip install "dex-agents[otel]"'
    ) from e

from ..session._usage import ModelCallMetadata, Usage

TRACER_NAME = "dex_agents"


def chat_span_attributes(
    metadata: ModelCallMetadata, usage: Usage | None
) -> tuple[bool, dict[str, str | int | list[str]]]:
    """Whether the span is a CLIENT span, and its `gen_ai.*` attributes.

    Pure, so the rules are tested without an exporter.
    """
    single = usage is not None and usage.model_calls == 1
    attributes: dict[str, str | int | list[str]] = {"gen_ai.operation.name": "chat"}
    if metadata.request_model:
        attributes["gen_ai.request.model"] = metadata.request_model
    if metadata.response_model:
        attributes["gen_ai.response.model"] = metadata.response_model
    if metadata.provider_name:
        attributes["gen_ai.provider.name"] = metadata.provider_name
    if metadata.response_id:
        attributes["gen_ai.response.id"] = metadata.response_id
    if metadata.finish_reasons:
        attributes["gen_ai.response.finish_reasons"] = list(metadata.finish_reasons)
    if single and usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
    return single, attributes


def record_chat_span(
    *,
    start_ns: int,
    end_ns: int,
    metadata: ModelCallMetadata | None,
    usage: Usage | None,
    session: Mapping[str, str | int],
    error: BaseException | None = None,
) -> None:
    """Emit the chat span of one RunModel attempt through the global tracer provider."""
    metadata = metadata or ModelCallMetadata()
    client, attributes = chat_span_attributes(metadata, None if error else usage)
    for key, value in session.items():
        attributes[f"dex_agents.{key}"] = value
    name = f"chat {metadata.request_model}" if metadata.request_model else "chat"
    span = trace.get_tracer(TRACER_NAME).start_span(
        name,
        kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
        start_time=start_ns,
        attributes=attributes,
    )
    if error is not None:
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, str(error)))
    span.end(end_time=end_ns)

"""OpenTelemetry: one chat span per RunModel attempt (extra `[otel]`).

The span is emitted inside the activity, not the workflow: a session workflow may
never complete, so a workflow span would never export. One span covers one model
segment. It is CLIENT with usage when the segment made exactly one model call,
and INTERNAL without usage when it made several (an inline tool call and the
answer after it), because then no single request carries those numbers. The
attributes come only from what the runner reported (`ModelCallMetadata`): the
library never guesses a provider from a model name or a URL.
"""

__all__: list[str] = []

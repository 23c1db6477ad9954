"""The connector model: reviewed operations, and the manifest that exposes them.

A connector is a provider client (a ledger, a payment API) that offers a few
operations. Code defines an operation (its input schema and how to invoke it);
a reviewed manifest, shipped as JSON beside the connector, decides which
operations an agent may call and which calls wait for a person. Keeping the
manifest apart from code means a review of one JSON file answers "what can this
agent do to the world?".

An operation is a `query` (reads) or a `mutation` (writes). A mutation whose
provider deduplicates by call ID is `retry: "safe"`: its tool Step retries under
the same call ID. Every other mutation runs at most once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeAlias, assert_never, cast

from .._errors import InvalidOptionError
from ..session._json import JsonObject, JsonValue
from ..session._policy import ToolEffect
from ..session._records import DeferredToolExecution
from ..session._tool_sources import SourceQuestion, SourceTaskStarted

ConnectorKind = Literal["query", "mutation"]
"""`query` reads; `mutation` writes."""
ConnectorRetry = Literal["safe", "unsafe"]
"""`safe`: the provider deduplicates by call ID, so a retry cannot write twice."""
ManifestApproval = Literal["always", "never", "predicate"]
"""`predicate`: the operation's `requires_approval` decides from the final input."""

_KINDS: tuple[ConnectorKind, ...] = ("query", "mutation")
_RETRIES: tuple[ConnectorRetry, ...] = ("safe", "unsafe")
_APPROVALS: tuple[ManifestApproval, ...] = ("always", "never", "predicate")


class ConnectorError(Exception):
    """The provider refused or failed the call for certain; the model reads the message."""


class ConnectorOutcomeUnknown(Exception):
    """The provider may or may not have applied the call (a timeout after sending).

    The call records outcome_unknown and is never retried: only the provider's
    own state can tell what happened.
    """


_FENCE_KEY = "connector_fence"


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectorFence:
    """The marker an attempt leaves in its Step's heartbeat checkpoint before it invokes.

    A later attempt that finds it knows an earlier one began invoking the
    provider under the same call ID, so the provider may have applied the call.
    It is best effort (a crash can beat the heartbeat that carries it): its
    absence never proves that nothing happened.
    """

    call_id: str
    operation: str
    attempt: int

    def to_checkpoint(self) -> JsonObject:
        """The heartbeat checkpoint that carries this fence."""
        return {
            _FENCE_KEY: {
                "call_id": self.call_id,
                "operation": self.operation,
                "attempt": self.attempt,
            }
        }

    @classmethod
    def from_checkpoint(cls, checkpoint: JsonValue | None) -> ConnectorFence | None:
        """The fence in `checkpoint`, or None when it holds none."""
        if not isinstance(checkpoint, dict):
            return None
        match checkpoint.get(_FENCE_KEY):
            case {
                "call_id": str(call_id),
                "operation": str(operation),
                "attempt": int(attempt),
            }:
                return cls(call_id=call_id, operation=operation, attempt=attempt)
            case _:
                return None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectorInvocation:
    """One run of an operation in its tool Step."""

    reference: str
    """Which connection (account, project) the tool is bound to."""
    operation: str
    arguments: JsonObject
    call_id: str
    """The provider's idempotency key: the same on every attempt of one call."""
    attempt: int
    """The tool Step's attempt, from 1."""
    earlier_fence: ConnectorFence | None = None
    """The fence an earlier attempt of this call left, if its heartbeat got through.

    A retry-safe operation may use it to look the call up by `call_id` before
    sending it again; the provider's deduplication is what makes a retry safe.
    """


ConnectorResult: TypeAlias = JsonValue | SourceTaskStarted | SourceQuestion
"""What an operation returns: its result (text or JSON), a started task, or a question."""

ConnectorInvoke: TypeAlias = Callable[[ConnectorInvocation], Awaitable[ConnectorResult]]


@dataclass(frozen=True, kw_only=True)
class ConnectorOperation:
    """One operation a connector offers, as code defines it."""

    name: str
    description: str
    input_schema: JsonObject
    """JSON Schema of the operation's input; checked before the call defers."""
    kind: ConnectorKind
    invoke: ConnectorInvoke
    retry: ConnectorRetry = "unsafe"
    requires_approval: Callable[[JsonObject], bool] | None = None
    """The approval predicate a manifest's `"approval": "predicate"` uses."""
    timeout: timedelta = timedelta(seconds=30)
    """The tool Step's timeout for one attempt."""
    attempts: int = 3
    """Attempts of a query or a retry-safe mutation."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidOptionError(
                f"operation {self.name!r}: unknown kind {self.kind!r}"
            )
        if self.retry not in _RETRIES:
            raise InvalidOptionError(
                f"operation {self.name!r}: unknown retry {self.retry!r}"
            )
        if self.attempts < 1:
            raise InvalidOptionError(
                f"operation {self.name!r}: attempts must be at least 1"
            )

    def bind(
        self,
        reference: str,
        *,
        manifest: Mapping[str, Any],
        input_validator: InputValidator | None = None,
    ) -> ConnectorTool:
        """This operation bound to the connection `reference` under a reviewed manifest.

        The manifest decides whether the tool is offered and which calls need
        approval. A manifest that names a different kind or retry than the code
        is refused: the reviewed file and the code must agree on what may write.

        Raises:
            InvalidOptionError: The manifest is malformed, disagrees with the
                operation, or asks for a predicate the operation lacks.
        """
        entry = parse_manifest(manifest).get(self.name)
        if entry is not None:
            if entry.kind is not None and entry.kind != self.kind:
                raise InvalidOptionError(
                    f"the manifest says {self.name!r} is a {entry.kind}, but the "
                    f"operation is a {self.kind}; fix one of them"
                )
            if entry.retry is not None and entry.retry != self.retry:
                raise InvalidOptionError(
                    f"the manifest says {self.name!r} has retry {entry.retry!r}, but "
                    f"the operation has {self.retry!r}; fix one of them"
                )
            if entry.approval == "predicate" and self.requires_approval is None:
                raise InvalidOptionError(
                    f"the manifest gives {self.name!r} approval by predicate, but the "
                    "operation has no `requires_approval`"
                )
        return ConnectorTool(
            operation=self,
            reference=reference,
            entry=entry,
            input_validator=input_validator,
        )

    @property
    def effect(self) -> ToolEffect:
        """The session's effect class: what decides the Step a call runs in."""
        match self.kind:
            case "query":
                return "read"
            case "mutation":
                return (
                    "idempotent_write"
                    if self.retry == "safe"
                    else "non_idempotent_write"
                )
            case _:
                assert_never(self.kind)


@dataclass(frozen=True, kw_only=True, slots=True)
class ManifestEntry:
    """What a manifest says about one operation."""

    expose: bool
    approval: ManifestApproval
    kind: ConnectorKind | None = None
    retry: ConnectorRetry | None = None


def parse_manifest(manifest: Mapping[str, Any]) -> dict[str, ManifestEntry]:
    """The manifest's operations by name.

    The format is `{"connector": ..., "operations": {"<name>": {"kind": ...,
    "retry": ..., "approval": "always" | "never" | "predicate", "expose": true}}}`;
    `approval` defaults to `"always"` so that a forgotten field asks a person.

    Raises:
        TypeError: The manifest is malformed.
    """
    operations = manifest.get("operations")
    if not isinstance(operations, Mapping):
        raise InvalidOptionError("a connector manifest needs an `operations` object")
    entries: dict[str, ManifestEntry] = {}
    for name, raw in cast(Mapping[str, Any], operations).items():
        if not isinstance(raw, Mapping):
            raise InvalidOptionError(f"manifest operation {name!r} must be an object")
        spec = cast(Mapping[str, Any], raw)
        approval = spec.get("approval", "always")
        kind = spec.get("kind")
        retry = spec.get("retry")
        if approval not in _APPROVALS:
            raise InvalidOptionError(
                f"manifest operation {name!r}: unknown approval {approval!r}"
            )
        if kind is not None and kind not in _KINDS:
            raise InvalidOptionError(
                f"manifest operation {name!r}: unknown kind {kind!r}"
            )
        if retry is not None and retry not in _RETRIES:
            raise InvalidOptionError(
                f"manifest operation {name!r}: unknown retry {retry!r}"
            )
        entries[str(name)] = ManifestEntry(
            expose=bool(spec.get("expose", True)),
            approval=approval,
            kind=kind,
            retry=retry,
        )
    return entries


InputValidator: TypeAlias = Callable[[JsonObject], object] | type[Any]
"""A callable that raises on bad input, or a class with `model_validate` (pydantic)."""


@dataclass(frozen=True, kw_only=True)
class ConnectorTool:
    """An operation bound to a connection and judged by a manifest; see `ConnectorOperation.bind`."""

    operation: ConnectorOperation
    reference: str
    entry: ManifestEntry | None
    """None when the manifest does not list the operation: it is not offered."""
    input_validator: InputValidator | None = None

    @property
    def name(self) -> str:
        """The tool's bare name: the operation's."""
        return self.operation.name

    @property
    def exposed(self) -> bool:
        """Whether the manifest lets an agent call it."""
        return self.entry is not None and self.entry.expose

    def needs_approval(self, arguments: JsonObject) -> bool:
        """Whether a call with this final input waits for a person, per the manifest."""
        entry = self.entry
        if entry is None:
            return True
        match entry.approval:
            case "always":
                return True
            case "never":
                return False
            case "predicate":
                predicate = self.operation.requires_approval
                return True if predicate is None else bool(predicate(arguments))
            case _:
                assert_never(entry.approval)

    def validate(self, arguments: JsonObject) -> None:
        """Check `arguments` against the schema and the input validator.

        Raises:
            ValueError: The input does not fit; the message says why.
        """
        try:
            import jsonschema
        except ImportError as e:  # pragma: no cover - the `claude` extra has it
            raise ImportError(
                'connector tools need jsonschema: pip install "dex-agents[claude]"'
            ) from e
        try:
            jsonschema.validate(
                instance=dict(arguments), schema=self.operation.input_schema
            )
        except jsonschema.ValidationError as e:
            raise ValueError(f"Input validation error: {e.message}") from e
        validator = self.input_validator
        if validator is None:
            return
        try:
            model_validate = getattr(validator, "model_validate", None)
            if callable(model_validate):
                model_validate(dict(arguments))
            else:
                cast(Callable[[JsonObject], object], validator)(dict(arguments))
        except Exception as e:
            raise ValueError(f"Input validation error: {e}") from e


def connector_call_id(execution: DeferredToolExecution) -> str:
    """The provider call ID of a deferred call: from its Step execution ID.

    Every attempt of one tool Step has the same Step execution ID, so a retried
    retry-safe mutation reaches the provider under the same call ID, also on
    another Worker after a crash.
    """
    seed = f"{execution.flow_id}/{execution.step_execution_id}"
    return "dexcall_" + hashlib.sha256(seed.encode()).hexdigest()[:32]


def result_text(result: JsonValue) -> str:
    """The record text of an operation's result: a string as is, JSON otherwise."""
    return result if isinstance(result, str) else json.dumps(result, sort_keys=True)

"""The API's request and response bodies (what the OpenAPI schema describes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, with_config
from pydantic_core import PydanticCustomError

from .._errors import InvalidArgumentError
from ..session._json import JsonObject
from ..session._media import ImageReference
from ..session._policy import ToolEffect
from ..session._state import Interrupt, SessionStatus, TurnSummary
from ..temporal._arguments import MAX_ID_BYTES, check_session_id
from ..temporal._models import ResolveInterruptInput
from ..temporal._snapshot import AgentSnapshot
from ._errors import ErrorCode


def _session_id(value: str) -> str:
    """`value` if the library takes it as a session ID (`check_session_id`), else its refusal.

    The web takes every ID the library, the CLI and the engine take (any
    non-empty text of at most `MAX_ID_BYTES` bytes in UTF-8, `a;b/ç` too), so
    every session they start can be read and answered here. In a path it is
    percent-encoded (`encodeURIComponent`, `quote(id, safe="")`); pages and
    JSON escape it where they show it.
    """
    try:
        return check_session_id(value)
    except InvalidArgumentError as err:
        raise PydanticCustomError(
            "session_id", "{reason}", {"reason": str(err)}
        ) from err


SessionId = Annotated[
    str,
    Field(
        min_length=1,
        description=f"Any text of at most {MAX_ID_BYTES} bytes in UTF-8 (the "
        "library's rule); percent-encode it in a path.",
    ),
    AfterValidator(_session_id),
]


_REQUEST = ConfigDict(extra="forbid")
"""Request bodies refuse keys they do not have: a misspelled `edited_input` must
not approve the model's input as if no edit had been sent."""


@dataclass(frozen=True, kw_only=True)
class _OfSession:
    """What every response about one session names first: its ID."""

    session_id: str


MessageText = Annotated[str, Field(min_length=1, max_length=32 * 1024 * 1024)]
"""A message's text: not empty (the schema says it, so an empty one is a 422 like
any other mismatch), at most 32 MiB."""
SpendLimit = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A spend limit in USD: a positive, finite number."""
MediaType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class ImageRef:
    """An image already in the agent's media store (`MediaStore.put_image`), by reference."""

    media_type: MediaType
    key: Annotated[str, Field(min_length=1, max_length=500)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    size: Annotated[int, Field(ge=0)]

    def reference(self) -> ImageReference:
        """The library's reference."""
        return ImageReference(
            media_type=self.media_type, key=self.key, sha256=self.sha256, size=self.size
        )


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class StartSession:
    """Start a session (or send to it, if it exists: start is idempotent)."""

    session_id: SessionId | None = None
    """The new session's ID; a fresh `web-<hex>` one when absent."""
    message: MessageText | None = None
    images: list[ImageRef] = field(default_factory=lambda: [])
    flow: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The flow type to start; needed only when the app serves several flows."""


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class SendMessage:
    """A user message: text, and images by media-store reference."""

    text: MessageText
    images: list[ImageRef] = field(default_factory=lambda: [])
    wait: bool = False
    """Answer with the snapshot once the message's turn is over (`send_and_wait`)."""


@dataclass(frozen=True, kw_only=True)
class Queued:
    """The message is queued for a turn (always True: a message that cannot be is an error)."""

    queued: bool


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class ApproveCall:
    """Approve a call as it is, or with an edited input instead of the model's."""

    edited_input: JsonObject | None = None
    """The call's whole input to run instead of the model's. The session's worker
    checks it against the tool's input schema first: a refused edit answers 422
    `invalid_edit` (`error.field` names the field) and the call still waits. The
    call's record and its `interrupt_resolved` event keep both inputs and the
    token's name as who edited. An edit needs a worker: with none it is 503
    `no_worker`, never recorded for later."""
    new_spend_limit: SpendLimit | None = None
    """For a spend-limit interrupt (`kind: budget`, session status
    `budget_reached`), and needed for one: the session's new limit in USD,
    above what it spent; the turn goes on under it. A missing or too low
    limit for such an interrupt, or one given for a tool call's, is 400
    `invalid_request` and nothing changes."""


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class Rejection:
    """Why a call is rejected: the model reads `message` instead of a result."""

    message: Annotated[str, Field(max_length=10_000)] | None = None


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class CancelTurn:
    """Stop the running turn; `reason` is kept in its error and `turn_cancelled` event."""

    reason: Annotated[str, Field(max_length=2_000)] = ""


@dataclass(frozen=True, kw_only=True)
class Cancelled:
    """Whether a turn was running and is now stopping (False: no turn runs).

    The turn then ends `cancelled` (event `turn_cancelled`), with the text it
    had streamed; a tool call already running finishes first.
    """

    cancelled: bool


@with_config(_REQUEST)
@dataclass(frozen=True, kw_only=True)
class EndSession:
    """End a session; `force` also ends one with work in progress."""

    reason: Annotated[str, Field(max_length=2_000)] = ""
    force: bool = False


@dataclass(frozen=True, kw_only=True)
class SessionSummary(_OfSession):
    """One line of the sessions list."""

    flow_type: str
    status: SessionStatus
    turn_count: int
    pending_approvals: int
    updated_at: str
    cost_usd: float


@dataclass(frozen=True, kw_only=True)
class SessionPage:
    """A page of sessions, most recently updated first."""

    sessions: list[SessionSummary]
    next_before: str | None
    """Pass as `before` for the next page; None on the last one."""


@dataclass(frozen=True, kw_only=True)
class Started(_OfSession):
    """A started (or reused) session; `queued` is True (also with no message to queue)."""

    queued: bool


@dataclass(frozen=True, kw_only=True)
class RecordedAnswer:
    """An answer no worker took: recorded in the session's history, not applied yet.

    It applies, once, when a worker of the session's flow starts; until then
    the approval still waits, and another answer to it changes nothing (the
    first recorded one is the one that applies). Never an edit: an edit needs
    a worker to check it, so it is never recorded.
    """

    approved: bool
    rejection_message: str | None
    new_spend_limit: float | None
    """The new spend limit (USD) of an approved `budget` interrupt."""
    resolved_by: str | None
    """Who answered: the token's name (or `dex-agents approve --as`)."""

    @classmethod
    def of(cls, resolution: ResolveInterruptInput) -> RecordedAnswer:
        """The recorded answer of `resolution`, as its Signal carries it."""
        return cls(
            approved=resolution.approved,
            rejection_message=resolution.rejection_message,
            new_spend_limit=resolution.new_spend_limit,
            resolved_by=resolution.resolved_by,
        )


@dataclass(kw_only=True)
class PendingInterrupt(Interrupt):
    """A pending interrupt of a snapshot, with the answer recorded for it, if any."""

    recorded: RecordedAnswer | None = None
    """The answer recorded for it while no worker ran (approve or reject answered
    `recorded: true`): it applies when a worker starts; null when none."""


@dataclass(kw_only=True)
class SessionSnapshot(AgentSnapshot):
    """A session's snapshot; each pending interrupt has `recorded`."""

    pending_interrupts: list[PendingInterrupt]  # pyright: ignore[reportIncompatibleVariableOverride]

    @classmethod
    def of(
        cls,
        snapshot: AgentSnapshot,
        recorded: Mapping[str, RecordedAnswer] | None = None,
    ) -> SessionSnapshot:
        """`snapshot` with the `recorded` answers of its pending interrupts, by ID."""
        answers = recorded or {}
        values = _values(snapshot)
        values["pending_interrupts"] = [
            PendingInterrupt(**_values(i), recorded=answers.get(i.interrupt_id))
            for i in snapshot.pending_interrupts
        ]
        return cls(**values)


def _values(instance: AgentSnapshot | Interrupt) -> dict[str, Any]:
    """The init fields of a dataclass `instance`, by name (shallow)."""
    return {f.name: getattr(instance, f.name) for f in fields(instance) if f.init}


@dataclass(kw_only=True)
class SessionView:
    """A session's snapshot.

    Who approved or rejected each call is in it: the `resolved_by` of the
    turns' tool call records (and of pending interrupts once answered). An
    answer no worker took yet is each pending interrupt's `recorded`.
    """

    snapshot: SessionSnapshot


@dataclass(kw_only=True)
class HistoryPage:
    """A page of finished turns, newest first."""

    turns: list[TurnSummary]
    next_before: int | None
    """Pass as `before` for the next (older) page; None on the last one."""


@dataclass(frozen=True, kw_only=True)
class Approval(_OfSession):
    """A tool call that waits for a person: what, why, until when, and for how long."""

    interrupt_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    effect: ToolEffect
    arguments: JsonObject
    """The call's exact input (read back from the store when it was long)."""
    reason: str
    created_at: str
    deadline: str | None
    age_seconds: float
    at_least_once: bool
    """Approved, it runs inside the model's CLI and may run again after a crash."""
    kind: Literal["tool_call", "budget"] = "tool_call"
    """`budget`: the session reached its spend limit (`tool_name` `spend_limit`,
    `arguments` with `spent_usd` and `spend_limit_usd`); approve it with
    `new_spend_limit`, or reject it to end the turn."""
    recorded: RecordedAnswer | None = None
    """The answer recorded for it while no worker ran (approve or reject answered
    `recorded: true`): it applies when a worker of the session's flow starts,
    and the approval is listed until then; null when none."""


@dataclass(frozen=True, kw_only=True)
class ApprovalPage:
    """Pending approvals of every session, a page of sessions at a time."""

    approvals: list[Approval]
    next_before: str | None
    """Pass as `before` for the next page of sessions; None on the last one."""


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """The outcome of an approve (with or without an edited input) or reject."""

    interrupt_id: str
    approved: bool
    by: str
    """The token's name, recorded as the one who decided."""
    resolved: bool
    """True once applied; False when no worker took it yet (`recorded`)."""
    recorded: bool = False
    """No worker took it in time: it is in the session's history and applies
    when a worker runs the session."""


@dataclass(frozen=True, kw_only=True)
class Ended:
    """Whether this request ended the session (False: it had ended before)."""

    ended: bool


@dataclass(frozen=True, kw_only=True)
class ErrorDetail:
    """What went wrong, as a stable `code` and a message that says the fix."""

    code: ErrorCode
    message: str
    field: str | None = None
    """For `invalid_edit`: the input field at fault (`orderId`, `items[0].sku`;
    empty for the input as a whole). Absent for other errors."""


@dataclass(frozen=True, kw_only=True)
class ErrorBody:
    """Every error answer."""

    error: ErrorDetail

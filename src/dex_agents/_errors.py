"""The error tree of dex-agents.

```
DexAgentsError
├── UserError            wrong use of the API; fix the code, retrying will not help
│   ├── InvalidArgumentError  an RPC argument of the wrong type or value, or an
│   │   │                     option value out of range (also a ValueError);
│   │   │                     nothing was sent, written or built
│   │   └── InvalidEditError  an approval's edited input the tool refuses; the
│   │                         call stays pending
│   ├── InvalidOptionError    a definition that cannot work: agent options, tools,
│   │                         tool sources, connector manifests (also a TypeError)
│   ├── UnknownSessionError   no session has this ID
│   ├── UnknownInterruptError
│   ├── SessionEndedError   the session ended: it takes no more messages or approvals
│   └── SessionBusyError    `end` without force, while the session has work in progress
├── SessionError         a session failed at runtime
│   ├── BudgetReachedError   a segment spent the rest of the limit; the session asks
│   └── MessageTooLargeError
├── EngineError          the Temporal engine (dev server or cluster) is unusable
│   └── NoWorkerError    no worker took a request within its timeout (`recorded` says
│                        whether it still applies when one starts)
├── StoreUnavailableError  the runtime store failed to serve a call (locked, timed
│                        out, its server down); try again once it is reachable
├── IdleTimeoutError     `wait_for_idle` timed out while a worker ran the turn
└── ToolExecutionError   raised by a tool to record a failed result the model reads
```
"""

from __future__ import annotations

import math
from typing import ClassVar

_SHOWN_CHARACTERS = 60


def shown(value: object) -> str:
    """A value for an error message: its type and a bounded repr."""
    text = repr(value)
    if len(text) > _SHOWN_CHARACTERS:
        text = f"{text[: _SHOWN_CHARACTERS - 3]}..."
    return f"{type(value).__name__} {text}"


class DexAgentsError(Exception):
    """Base for every error this library raises."""

    _pickled: ClassVar[tuple[str, ...]] = ()
    """The attributes that, in order, are the constructor's arguments again.

    A pickled error (one crossing a process or a Temporal payload) is rebuilt
    from them; with none, it pickles as any exception does.
    """

    def __reduce__(self) -> str | tuple[object, ...]:
        if not self._pickled:
            return super().__reduce__()
        return (type(self), tuple(getattr(self, name) for name in self._pickled))


class UserError(DexAgentsError):
    """Wrong use of the API; fix the code, retrying will not help."""


class InvalidArgumentError(UserError, ValueError):
    """An RPC argument of the wrong type or value, refused before anything is sent.

    Also an option's value out of range (`AgentSessionOptions`, `ToolPolicy`),
    refused when it is built; `argument` names the option then.

    Nothing reaches the session: no Update, no Signal, no store write. The
    message names the argument, what it got and what to pass instead;
    `argument` is its name (`"approved"`, `"interrupt_id"`).
    """

    _pickled = ("argument", "message")

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument
        self.message = message


class InvalidEditError(InvalidArgumentError):
    """An approval's edited input that the tool refuses; the call stays pending.

    The runner checked the edit against the tool's input schema and decided
    its policy again: `field` names the input field at fault (`"orderId"`,
    `"items[0].sku"`; empty for the input as a whole). Nothing was resolved:
    approve again with a fixed edit, without one, or reject. It is the
    `InvalidArgumentError` of the argument `edited_input`.
    """

    _pickled = ("field", "message")

    def __init__(self, field: str, message: str) -> None:
        super().__init__("edited_input", message)
        self.field = field


class InvalidOptionError(UserError, TypeError):
    """A definition that cannot work; the message names what and says the fix.

    Raised where a flow is built (two tools of one name, a tool source listing
    a Claude Code tool, a connector operation its manifest contradicts) and by
    a turn whose Claude agent options the adapter refuses; there it fails the
    attempt for good (retrying cannot help). It is also a `TypeError`, which
    these refusals were before they were `UserError`s.
    """


def must_be(
    argument: str,
    what: str,
    value: object,
    fix: str = "",
    *,
    named: str = "",
    error: type[InvalidArgumentError | InvalidOptionError] = InvalidArgumentError,
) -> UserError:
    """The refusal of `argument` holding `value` where it must be `what`; raise it.

    Its message: "`argument` must be `what`, got `shown(value)`; `fix`", where
    `named` replaces "`argument`" for a part of it (`` `tool_policies` keys ``)
    or a qualified name. The error is `error`; an `InvalidArgumentError` also
    carries `argument`.
    """
    message = f"{named or f'`{argument}`'} must be {what}, got {shown(value)}"
    if fix:
        message += f"; {fix}"
    if issubclass(error, InvalidOptionError):
        return error(message)
    return error(argument, message)


def is_positive_number(value: object) -> bool:
    """Whether `value` is an int or float (not a bool) that is finite and above 0."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


class _SessionRefused(UserError):
    """A refusal about session `session_id`: `message`, else the class's `_default`."""

    _pickled = ("session_id", "message")
    _default: ClassVar[str]
    """The message, with `{session_id}` for the ID's `repr`."""

    def __init__(self, session_id: str, message: str | None = None) -> None:
        super().__init__(message or self._default.format(session_id=repr(session_id)))
        self.session_id = session_id
        self.message = str(self)


class UnknownSessionError(_SessionRefused):
    """No session has this ID on the engine (and namespace) the client talks to."""

    _default = (
        "unknown session {session_id}; list sessions with `dex-agents sessions`, "
        "or start it first (`SessionClient.start`)"
    )


class UnknownInterruptError(_SessionRefused):
    """`resolve_interrupt` named an interrupt the session never created."""

    _pickled = ("session_id", "interrupt_id")

    def __init__(self, session_id: str, interrupt_id: str) -> None:
        self.interrupt_id = interrupt_id
        super().__init__(
            session_id,
            f"session {session_id!r} has no interrupt {interrupt_id!r}; "
            "read `pending_interrupts` from `SessionClient.snapshot` for valid IDs",
        )


class SessionEndedError(_SessionRefused):
    """The session ended (`SessionClient.end`): it takes no more messages or approvals.

    Its history stays readable (`snapshot`, `history`, `events`); go on in a
    new session with another ID.
    """

    _default = (
        "session {session_id} has ended; it takes no more messages or approvals. "
        "Its history stays readable; start a new session with another ID to go on"
    )


class SessionBusyError(_SessionRefused):
    """`end` refused a session with work in progress; wait for it, or end with `force`."""

    _default = (
        "session {session_id} has work in progress; wait for it "
        "(`SessionClient.wait_for_idle`) or end it with `force=True`"
    )


class SessionError(DexAgentsError):
    """A session failed at runtime.

    `retryable` and `retry_after` tell the engine binding whether another attempt
    can help; retry policy is decided there, not where the error is raised.
    """

    def __init__(
        self, message: str, *, retryable: bool = True, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class BudgetReachedError(SessionError):
    """A model segment stopped at the call that spent the rest of the spend limit.

    Raised by a runner whose framework enforces the remaining budget it was
    given (`RunModelContext.max_budget_usd`); `usage` is what the segment
    spent, as `Usage` fields. The session then waits for a new limit
    (status `budget_reached`) instead of retrying.
    """

    def __init__(self, message: str, *, usage: dict[str, float | int]) -> None:
        super().__init__(message, retryable=False)
        self.usage = usage

    def __reduce__(self) -> tuple[object, ...]:
        return (_budget_reached, (str(self), self.usage))


def _budget_reached(message: str, usage: dict[str, float | int]) -> BudgetReachedError:
    return BudgetReachedError(message, usage=usage)


class MessageTooLargeError(SessionError):
    """The model refused a turn's input as too large.

    Raised by a runner; retrying cannot help, so the turn fails at once and
    its user messages are dropped (the failure note says so), which leaves
    the session answering the next, smaller, message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class EngineError(DexAgentsError):
    """The Temporal engine cannot be started or reached; the message says what to do."""


class NoWorkerError(EngineError):
    """No worker of the session's flow took a request within the caller's timeout.

    Temporal hands an Update only to a running worker, and keeps it only in
    the server's memory until one takes it. `recorded` says what became of
    this request: True for a resolution, which the client then recorded in the
    session's history (a Signal, kept with no worker running), so it applies
    as soon as a worker runs the session (if the session still waits on that
    interrupt); False for a wait, which recorded nothing (call it again once a
    worker runs), and for a resolution that an earlier recorded one overrides:
    one of the other way, or an approval with another spend limit
    (`superseded` says which, such as `an approval`: the first one applies).
    A request that was not recorded (an edited approval, a cancel, an end)
    carries an expiry: the server's copy is refused if a worker takes it later,
    so it never applies after this error said it did not.
    """

    def __init__(
        self,
        session_id: str,
        request: str,
        *,
        timeout: float,
        recorded: bool,
        superseded: str | None = None,
    ) -> None:
        if superseded is not None:
            outcome = (
                f"{superseded} is already recorded for it and applies first when "
                "a worker starts, so this one was not recorded"
            )
        elif recorded:
            outcome = (
                "it is recorded in the session's history and applies when a worker "
                "for its flow starts"
            )
        else:
            outcome = "nothing was recorded: call it again once a worker runs"
        super().__init__(
            f"no worker took {request} of session {session_id!r} within "
            f"{timeout:g} s; {outcome} (`dex-agents worker --agent module:flow` "
            "starts one)"
        )
        self.session_id = session_id
        self.request = request
        self.timeout = timeout
        self.recorded = recorded
        self.superseded = superseded
        """The earlier recorded resolution that wins (`"an approval"`), if any."""

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _no_worker_error,
            (
                self.session_id,
                self.request,
                self.timeout,
                self.recorded,
                self.superseded,
            ),
        )


def _no_worker_error(
    session_id: str,
    request: str,
    timeout: float,
    recorded: bool,
    superseded: str | None = None,
) -> NoWorkerError:
    return NoWorkerError(
        session_id, request, timeout=timeout, recorded=recorded, superseded=superseded
    )


class StoreUnavailableError(DexAgentsError):
    """The runtime store could not serve a call: locked, timed out, or its server down.

    An operational failure of a store that opened (a SQLite file another
    process kept locked past `busy_timeout`, a PostgreSQL pool that timed out
    or a server that went away), not a bug: the same call can succeed once the
    store is reachable again. `store` names it (a SQLite file's path, a
    PostgreSQL host, port and database, never a password); `reason` is what the
    database said.
    """

    _pickled = ("store", "reason")

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(
            f"the runtime store {store} is unavailable: {reason}; check that it is "
            "running and reachable (a SQLite file: that no other process keeps it "
            "locked), then try again"
        )
        self.store = store
        self.reason = reason


class IdleTimeoutError(DexAgentsError, TimeoutError):
    """`wait_for_idle` reached its timeout while a worker was still running the turn.

    Nothing changed: the turn goes on, and a later `wait_for_idle` sees its end.
    It is also a `TimeoutError`, as an `asyncio.timeout` around the call would raise.
    """

    _pickled = ("session_id", "timeout")

    def __init__(self, session_id: str, timeout: float) -> None:
        super().__init__(
            f"session {session_id!r} was still running a turn after {timeout:g} s; "
            "wait again (`wait_for_idle`), or pass a longer `timeout=`"
        )
        self.session_id = session_id
        self.timeout = timeout


class ToolExecutionError(DexAgentsError):
    """Raised by a tool to record a failed result instead of failing its Step.

    The model reads the message; a write that raises it is not retried and is
    not `outcome_unknown`, because the tool itself says it did not happen.
    """

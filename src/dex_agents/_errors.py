"""The error tree of dex-agents.

```
DexAgentsError
├── UserError            wrong use of the API; fix the code, retrying will not help
│   └── UnknownInterruptError
├── SessionError         a session failed at runtime
│   ├── SpendLimitExceeded
│   └── MessageTooLargeError
├── EngineError          the Temporal engine (dev server or cluster) is unusable
└── ToolExecutionError   raised by a tool to record a failed result the model reads
```
"""

from __future__ import annotations


class DexAgentsError(Exception):
    """Base for every error this library raises."""


class UserError(DexAgentsError):
    """Wrong use of the API; fix the code, retrying will not help."""


class UnknownInterruptError(UserError):
    """`resolve_interrupt` named an interrupt the session never created."""

    def __init__(self, session_id: str, interrupt_id: str) -> None:
        super().__init__(
            f"session {session_id!r} has no interrupt {interrupt_id!r}; "
            "read `pending_interrupts` from `get_agent_snapshot` for valid IDs"
        )
        self.session_id = session_id
        self.interrupt_id = interrupt_id

    def __reduce__(self) -> tuple[type[UnknownInterruptError], tuple[str, str]]:
        return (UnknownInterruptError, (self.session_id, self.interrupt_id))


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


class SpendLimitExceeded(SessionError):
    """The session's spend limit was reached before a model segment started."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


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


class ToolExecutionError(DexAgentsError):
    """Raised by a tool to record a failed result instead of failing its Step.

    The model reads the message; a write that raises it is not retried and is
    not `outcome_unknown`, because the tool itself says it did not happen.
    """

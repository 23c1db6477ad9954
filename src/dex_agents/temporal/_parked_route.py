"""How the workflow routes a resumed segment to its park, kept out of the workflow module.

The workflow module runs in Temporal's sandbox, which executes it again for
every workflow instance; what lives here is imported once per process (it
is passed through), so a cached session does not carry its own copy.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as StepTimeoutError

from ..session._turns import RunModelStep

PARKED_START = timedelta(seconds=2)
"""How long a parked segment's Step waits for its worker before it resumes cold."""


@dataclass(frozen=True, slots=True)
class Parked:
    """The resumed segment of the last deferral, parked on a worker's own queue."""

    queue: str
    segment_id: str
    """The deferring segment: only the Step that resumes it takes the park."""
    until: datetime

    def holds(self, step: RunModelStep, now: datetime) -> bool:
        """Whether `step` resumes the parked segment inside its window."""
        resume = step.resume
        return (
            resume is not None
            and resume.partial_segment_id == self.segment_id
            and now < self.until
        )


@dataclass(frozen=True, slots=True)
class Stopped:
    """A model Step stopped by `cancel_turn`, with what it had streamed."""

    streamed_text: str


def ignore_failure(handle: asyncio.Future[None]) -> None:
    """A release whose worker is gone failed harmlessly: its park went with it."""
    if not handle.cancelled():
        handle.exception()


def resumes_cold(err: ActivityError) -> bool:
    """Whether a parked Step's failure lets the segment run again cold.

    Failures the cold path would not retry (a spent budget, a request too
    large, the application's own errors: `non_retryable`, set by the error's
    type at the engine edge) end the segment as they would there.
    """
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return not cause.non_retryable
    return True


def never_started(err: ActivityError) -> bool:
    """A Step no worker picked up (its worker is gone): it ran no attempt."""
    cause = err.cause
    return (
        isinstance(cause, StepTimeoutError)
        and cause.type == TimeoutType.SCHEDULE_TO_START
    )

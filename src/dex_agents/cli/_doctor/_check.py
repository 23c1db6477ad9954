"""One check's outcome, and the guards every check runs under."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from rich.text import Text

from .._errors import DEBUG_ENV, one_line

Status = Literal["pass", "warn", "fail", "skip"]
_MARKS: dict[Status, tuple[str, str]] = {
    "pass": ("✓", "green"),
    "warn": ("!", "yellow"),
    "fail": ("✗", "bold red"),
    "skip": ("–", "dim"),
}
GRACE = 1.0
"""Seconds a check may overrun `--timeout` with its own message before the
doctor gives up on it with a generic one."""
_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class Check:
    """One check's outcome: its line, and what to do when it failed or warned."""

    name: str
    """A stable key for `--json`: `claude_cli`, `credentials`, `temporal`,
    `runtime_store`, `media_store`."""
    status: Status
    text: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=lambda: {})

    def __post_init__(self) -> None:
        # One line per check, whatever a library's message looks like.
        object.__setattr__(self, "text", " ".join(self.text.split()))
        if self.fix is not None:
            object.__setattr__(self, "fix", " ".join(self.fix.split()))

    def line(self) -> Text:
        """The check as one line: a mark, what was found and, if any, the fix."""
        mark, style = _MARKS[self.status]
        line = Text.assemble((mark, style), " ", self.text)
        if self.fix:
            line.append(" — fix: ", style="dim")
            line.append(self.fix, style="yellow" if self.status == "warn" else "")
        return line

    def to_json(self) -> dict[str, Any]:
        """The check for `--json`."""
        return {
            "check": self.name,
            "status": self.status,
            "message": self.text,
            "fix": self.fix,
            **self.details,
        }


@dataclass(kw_only=True)
class Subject:
    """What one check looks at: the check's name, its line's title, its details.

    `details` (what `--json` adds) may be filled in as the check learns more.
    """

    name: str
    title: str
    details: dict[str, Any] = field(default_factory=lambda: {})

    def outcome(
        self, status: Status, text: str, fix: str | None = None, *, sep: str = ": "
    ) -> Check:
        """The check's line `<title><sep><text>`, with the `fix` it says."""
        return Check(
            name=self.name,
            status=status,
            text=f"{self.title}{sep}{text}",
            fix=fix,
            details=self.details,
        )

    def failed(self, message: str) -> Check:
        """The check failed with a message that says `what; what to do`."""
        return failed_check(self.name, self.title, message, self.details)


async def guarded(
    name: str, title: str, check: Awaitable[Check], timeout: float
) -> Check:
    """`check`'s outcome, or a failed line when it overran or broke."""
    try:
        async with asyncio.timeout(timeout + GRACE):
            return await check
    except TimeoutError:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: no answer within {timeout:g} s",
            fix="check the network and the service it names, or pass a longer "
            "`--timeout`",
        )
    except Exception as err:
        if os.environ.get(DEBUG_ENV):
            raise
        return Check(
            name=name,
            status="fail",
            text=f"{title}: unexpected {type(err).__name__}: {one_line(str(err))}",
            fix=f"set {DEBUG_ENV}=1 to see the traceback, and please report it",
        )


async def in_thread(fn: Callable[[], _T], timeout: float) -> _T:
    """`fn()` in a daemon thread, given up after `timeout` seconds.

    Not `asyncio.to_thread`: a call that hangs (a blackholed endpoint) would
    keep `asyncio.run` waiting for the executor at exit; a daemon thread ends
    with the process.

    Raises:
        TimeoutError: `fn` did not return in time.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(outcome: Callable[[], _T]) -> None:
        if future.done():
            return  # given up on already
        try:
            future.set_result(outcome())
        except BaseException as err:
            future.set_exception(err)

    def work() -> None:
        try:
            result = fn()
        except BaseException as err:
            error = err

            def outcome() -> _T:
                raise error

        else:

            def outcome() -> _T:
                return result

        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="dex-agents-doctor", daemon=True).start()
    async with asyncio.timeout(timeout):
        return await future


def reason(err: BaseException) -> str:
    """Why a connection failed, in a few words rather than a transport's dump."""
    cause = err.__cause__ or err
    if isinstance(cause, TimeoutError):
        return "no answer"
    text = str(cause)
    lowered = text.lower()
    for needle, said in (
        ("connection refused", "connection refused (nothing listens there)"),
        ("dns error", "the host name does not resolve"),
        ("failed to lookup address", "the host name does not resolve"),
        ("certificate", "TLS failed (certificate)"),
        ("connection reset", "the connection was reset (TLS expected?)"),
        ("unauthenticated", "refused the credentials (API key?)"),
    ):
        if needle in lowered:
            return said
    return one_line(text)[:200]


def failed_check(
    name: str, title: str, message: str, details: dict[str, Any] | None = None
) -> Check:
    """A failed check from a message that says `what; what to do`."""
    what, _, fix = message.partition("; ")
    return Check(
        name=name,
        status="fail",
        text=f"{title}: {what}",
        fix=fix or None,
        details=details or {},
    )

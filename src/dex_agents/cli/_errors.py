"""The one way a command fails: a single line on stderr and an exit code.

Every error a user can cause or fix (no server, no worker, an unknown session or
interrupt, a bad `--agent`) becomes a `CommandError` whose message says what to do.
A traceback is a bug report, not an error message, so it is shown only when
`DEX_AGENTS_DEBUG` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Coroutine, Iterator
from typing import IO, Any, TypeVar

import click
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from .._errors import DexAgentsError

DEBUG_ENV = "DEX_AGENTS_DEBUG"
_T = TypeVar("_T")


class CommandError(click.ClickException):
    """A failure the user can act on (exit code 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    def show(self, file: IO[Any] | None = None) -> None:
        """Print `error: <message>` on stderr, on one line whatever the width."""
        click.echo(f"error: {self.format_message()}", file=file, err=True)


class BadArgumentError(CommandError):
    """An argument that cannot work, such as a wrong `--agent` (exit code 2)."""

    exit_code = 2


def one_line(message: str) -> str:
    """The message on one line: a multi-line text keeps its first line only.

    Multi-line messages come from the engine (a server log's tail); the first line
    already names the log file to read.
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else "unknown error"


@contextlib.contextmanager
def translated_errors() -> Iterator[None]:
    """Turn library and Temporal errors into one-line `CommandError`s.

    A library error already says what to do. An error nobody anticipated is a
    bug: it is still one line, with how to see the traceback.
    """
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except DexAgentsError as err:
        raise CommandError(str(err)) from err
    except WorkflowUpdateFailedError as err:
        raise CommandError(f"the session refused: {err.cause or err}") from err
    except RPCError as err:
        raise CommandError(
            f"Temporal answered {err.status.name}: {err.message}"
        ) from err
    except Exception as err:
        if os.environ.get(DEBUG_ENV):
            raise
        raise CommandError(
            f"unexpected {type(err).__name__}: {err}; set {DEBUG_ENV}=1 to see the "
            "traceback, and please report it"
        ) from err


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run a command's coroutine with one-line errors."""
    with translated_errors():
        return asyncio.run(main)

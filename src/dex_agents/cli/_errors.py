"""The one way a command fails: a single line on stderr and an exit code.

Every error a user can cause or fix (no server, no worker, an unknown session or
interrupt, a bad `--agent`) becomes a `CommandError` whose message says what to do.
A traceback is a bug report, not an error message, so it is shown only when
`DEX_AGENTS_DEBUG` is set.

Exit codes (the README's table): 0 done; 1 an error the message says how to
fix (also a reader that left, as `| head` does: then silently); 2 a wrong
argument; 3 an answer recorded for when a worker starts (no worker took it
now); 4 an answer that came too late (the call was already answered the
other way, or approved with another edit or spend limit than this one).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import re
import shlex
import shutil
import sqlite3
import sys
import traceback
from collections.abc import Coroutine, Generator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click
import temporalio.runtime
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from .._errors import DexAgentsError

DEBUG_ENV = "DEX_AGENTS_DEBUG"
EXIT_RECORDED = 3
"""`approve`/`reject`: no worker took the answer now; it is recorded and applies
when one starts."""
EXIT_CONFLICT = 4
"""`approve`/`reject`: the call was already answered another way (the other way,
or approved with another edit or spend limit): this answer changed nothing."""
_T = TypeVar("_T")
_PROG = "dex-agents"
_LIBRARY_WORDS = {
    "port": "--port",
    "state_dir": "--state-dir",
    "namespace": "--namespace",
    "store": "--store",
    "address": "--address",
}
"""Keyword arguments that library messages name, and the options they are here."""
_KEYWORD = re.compile(r"`(\w+)=([^`]*)`(?! in code)")
"""A keyword argument in a message, unless the message names both spellings."""


class CommandError(click.ClickException):
    """A failure the user can act on (exit code 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(command_words(one_line(message)))

    def show(self, file: IO[Any] | None = None) -> None:
        """Print `error: <message>` on stderr, on one line whatever the width."""
        click.echo(f"error: {self.format_message()}", file=file, err=True)


class BadArgumentError(CommandError):
    """An argument that cannot work, such as a wrong `--agent` (exit code 2)."""

    exit_code = 2


class ConflictError(CommandError):
    """An answer to an approval already answered another way (exit code 4).

    The other way, or approved with another edit or spend limit than this one.
    """

    exit_code = EXIT_CONFLICT


def prog(invoked: str | None = None) -> str:
    """The command as the user can type it again: `dex-agents` only when it is on PATH.

    A venv's `bin/` is often not on PATH (`.venv/bin/dex-agents`), and advice
    naming a command the shell cannot find does not help. `invoked`: the path
    the command was run by (default: this process's `sys.argv[0]`).
    """
    if invoked is None:
        invoked = sys.argv[0] if sys.argv else ""
    if Path(invoked).name != _PROG:
        return _PROG  # `python -m dex_agents.cli`, or a test's runner
    found = shutil.which(_PROG)
    with contextlib.suppress(OSError):
        if found and Path(found).samefile(invoked):
            return _PROG
    return invoked


_WHERE_OPTIONS: ContextVar[tuple[str, ...]] = ContextVar("where_options", default=())
"""The options the running command was given that select where sessions live
(`--state-dir`, `--store`, `--address`, `--namespace`), as argv words: every
command it suggests carries them (set by `_context.remember_where`)."""


def set_where_options(words: Sequence[str]) -> None:
    """Remember the options that every suggested command carries (see `suggest`)."""
    _WHERE_OPTIONS.set(tuple(words))


def where_options() -> str:
    """The remembered options, shell-quoted, with a leading space (or "")."""
    words = _WHERE_OPTIONS.get()
    return "".join(f" {shlex.quote(word)}" for word in words)


def suggest(*args: str, raw: str = "") -> str:
    """A command to type next: `dex-agents ARGS RAW OPTIONS`.

    `args` (a subcommand, a session ID) are shell-quoted, so an ID with spaces
    or quotes pastes as one word; `raw` is kept as written (placeholders such as
    `--spend-limit USD`); the options that selected where sessions live come last.
    """
    words = " ".join(shlex.quote(arg) for arg in (prog(), *args))
    return f"{words}{f' {raw}' if raw else ''}{where_options()}"


def command_words(message: str) -> str:
    """A library message in the command line's words.

    Keyword arguments become options (`port=7233` is `--port 7233`), and
    `dex-agents` is the command as invoked (see `prog`).
    """

    def option(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2).strip("'\"")
        flag = _LIBRARY_WORDS.get(name)
        if flag is None:
            return match.group(0)
        return f"`{flag} {value}`" if value else f"`{flag}`"

    message = _KEYWORD.sub(option, message)
    name = prog()
    return message if name == _PROG else message.replace(f"`{_PROG} ", f"`{name} ")


def one_line(message: str) -> str:
    """The message on one line: a multi-line text keeps its first line only.

    Multi-line messages come from the engine (a server log's tail); the first line
    already names the log file to read.
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else "unknown error"


@contextlib.contextmanager
def translated_errors() -> Generator[None, None, None]:
    """Turn library and Temporal errors into one-line `CommandError`s.

    A library error already says what to do. An error nobody anticipated is a
    bug: it is still one line, with how to see the traceback.
    """
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except BrokenPipeError:
        raise  # the reader left (`| head`): click exits quietly
    except DexAgentsError as err:
        raise CommandError(str(err)) from err
    except WorkflowUpdateFailedError as err:
        raise CommandError(f"the session refused: {err.cause or err}") from err
    except RPCError as err:
        raise CommandError(
            f"Temporal answered {err.status.name}: {err.message}"
        ) from err
    except ImportError as err:
        if _EXTRA_HINT not in str(err):
            _unexpected(err)
        # An extra that is not installed (`[postgres]` for a postgresql:// store)
        # is a setup to fix, not a bug to report: its message says the fix.
        raise CommandError(str(err)) from err
    except (OSError, sqlite3.Error) as err:
        unusable = unusable_path(err)
        if unusable is not None:
            raise CommandError(unusable) from err
        _unexpected(err)
    except Exception as err:
        _unexpected(err)


_EXTRA_HINT = 'pip install "dex-agents['
"""What the library's import guards say: the extra to install."""


def _unexpected(err: Exception) -> NoReturn:
    """Raise a bug's one line, or the error itself (its traceback) when debugging."""
    if os.environ.get(DEBUG_ENV):
        raise err
    raise CommandError(
        f"unexpected {type(err).__name__}: {err}; set {DEBUG_ENV}=1 to see the "
        "traceback, and please report it"
    ) from err


_WRITE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC}


def unusable_path(err: OSError | sqlite3.Error, path: str | None = None) -> str | None:
    """What to say when a file of the state directory cannot be written; None if not that.

    SQLite names no file, so `path` (the store) is said for it when known.
    """
    if isinstance(err, OSError):
        if err.errno not in _WRITE_ERRNOS:
            return None
        where = err.filename if err.filename is not None else path
        what = err.strerror or str(err)
    else:
        text = str(err).lower()
        if not any(
            word in text for word in ("unable to open", "readonly", "read-only", "disk")
        ):
            return None
        where, what = path, str(err)
    named = f" {str(where)!r}" if where is not None else ""
    return (
        f"cannot write{named}: {what}; the state directory (and the store's "
        "directory: SQLite writes a journal next to it) must be writable: fix its "
        "permissions, or pass `--state-dir` (or `--store`) somewhere writable"
    )


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run a command's coroutine with one-line errors."""
    with translated_errors():
        return asyncio.run(main)


def release_engine_runtime() -> None:
    """Stop Temporal's Rust thread pool now, while the interpreter is whole.

    temporalio (1.35) keeps its default `Runtime`, a Tokio thread pool, in a
    module global, so without this it is dropped during interpreter
    finalization: its threads then take the GIL of a finalizing interpreter and
    the process aborts after the command's output (`Fatal Python error:
    PyGILState_Release`, exit 134 or 139, most often after a failed RPC).
    Every client holds the runtime too, so the clients that the traceback of a
    failed command still reaches (through its frames' locals) go first. Called
    once a command is over, whatever its outcome; a later connection in the
    same process (a test's) starts a new default runtime.
    """
    _clear_frames(sys.exception())
    gc.collect()
    ref = getattr(temporalio.runtime, "_runtime_ref", None)
    if ref is not None and hasattr(ref, "_default_runtime"):
        ref._default_runtime = None  # pyright: ignore[reportPrivateUsage]
    gc.collect()


def _clear_frames(error: BaseException | None) -> None:
    """Drop the locals of every frame in `error`'s traceback, its causes' and contexts'.

    The frames keep their code and line numbers, so a traceback still prints.
    """
    todo, seen = [error], set[int]()
    while todo:
        err = todo.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        todo += [err.__cause__, err.__context__]

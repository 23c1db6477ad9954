"""What a serving command (`worker`, `dev`) prints of the library's log.

The library logs through `logging` and configures nothing, as a library must.
A serving command owns its terminal, so while it serves, the `dex_agents`
loggers print there as one dim line each: the parking logger's INFO lines
(each park, and how it ended) and any warning. Without a handler, Python
printed warnings bare and INFO lines not at all. A traceback is printed only
with DEX_AGENTS_DEBUG set; its last line (the error) always is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Generator

from rich.console import Console
from rich.text import Text

from ._errors import DEBUG_ENV

_LOGGER = "dex_agents"


class _ConsoleLines(logging.Handler):
    """One line per record on the command's console: time, level, message."""

    def __init__(self, out: Console) -> None:
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            clock = time.strftime("%H:%M:%S", time.localtime(record.created))
            style = "dim" if record.levelno < logging.WARNING else "yellow"
            level = "" if record.levelno < logging.WARNING else "warning: "
            line = f"{clock} {level}{record.getMessage()}"
            if record.exc_info and record.exc_info[1] is not None:
                err = record.exc_info[1]
                line += f" ({type(err).__name__}: {err})"
                if os.environ.get(DEBUG_ENV):
                    line += "\n" + logging.Formatter().formatException(record.exc_info)
            self.out.print(Text(line, style=style), soft_wrap=True)
        except Exception:  # a log line must never break serving
            self.handleError(record)


@contextlib.contextmanager
def library_log_lines(out: Console) -> Generator[None, None, None]:
    """Print the library's INFO and warning lines on `out` while the block runs."""
    logger = logging.getLogger(_LOGGER)
    handler = _ConsoleLines(out)
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)

"""The last lines of a segment's CLI stderr, for the error its failure raises.

The SDK pipes the CLI's stderr only to a `stderr` callback and otherwise says
"Check stderr output for details" where the CLI died. Each segment sets the
callback to a `StderrTail`: it keeps the last `TAIL_LINES` lines (at most
`TAIL_BYTES` of them go in a message), passes every line on to the
application's own callback, or to the worker's stderr where the CLI wrote
before, and gives the tail with credentials redacted: API keys, tokens and the
values of authorization headers become `***`.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections import deque
from collections.abc import Callable

TAIL_LINES = 20
"""Lines of the CLI's stderr a failure's message carries, at most."""
TAIL_BYTES = 2048
"""UTF-8 bytes of those lines, at most (the oldest are cut first)."""
_NOTE_BYTES = 48
"""Kept for the note of lines not shown, so the whole tail stays within `TAIL_BYTES`."""
_KEPT_CHARACTERS = 65536
"""A longer line is kept by its end, redacted before it is cut."""
_SETTLE_SECONDS = 0.02
_SETTLE_ROUNDS = 10

_REDACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Header values: `Authorization: Bearer x`, `"x-api-key": "x"`, `Cookie: a=b`.
    (
        re.compile(
            r"""((?:proxy-)?authorization|x-api-key|api[-_]?key|cookie|set-cookie)"""
            r"""(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^"'\s,;}]+""",
            re.IGNORECASE,
        ),
        r"\1\2***",
    ),
    # Variables: `ANTHROPIC_API_KEY=x`, `CLAUDE_CODE_OAUTH_TOKEN: x`, `password=x`.
    (
        re.compile(
            r"""\b([A-Za-z0-9_]*(?:API_KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)"""
            r"""[A-Za-z0-9_]*)(["']?\s*[:=]\s*["']?)[^"'\s,;}]+""",
            re.IGNORECASE,
        ),
        r"\1\2***",
    ),
    (re.compile(r"\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), r"\1 ***"),
    # Keys by their shape: Anthropic's (`sk-ant-...`) and other `sk-` keys.
    (re.compile(r"\bsk-ant-[A-Za-z0-9_-]+"), "sk-ant-***"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "sk-***"),
    # Credentials in a URL: `https://user:secret@host`.
    (
        re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@", re.IGNORECASE),
        r"\1***@",
    ),
)


def redacted(text: str) -> str:
    """`text` with API keys, tokens and authorization values replaced by `***`."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def _bounded(line: str) -> str:
    """`line`, or the end of it redacted (a cut key would no longer look like one)."""
    if len(line) <= _KEPT_CHARACTERS:
        return line
    return f"... {redacted(line)[-_KEPT_CHARACTERS:]}"


def _to_worker_stderr(line: str) -> None:
    """Where the CLI's stderr went before the adapter read it: the worker's stderr."""
    print(line, file=sys.stderr, flush=True)


class StderrTail:
    """The `stderr` callback of one segment's CLI: keeps the tail, passes lines on."""

    def __init__(self, forward: Callable[[str], None] | None = None) -> None:
        self._forward = forward or _to_worker_stderr
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._seen = 0

    def __call__(self, line: str) -> None:
        """Take one line (the SDK strips its end); the application's callback sees it whole."""
        self._seen += 1
        self._lines.append(_bounded(line))
        self._forward(line)

    async def settle(self) -> None:
        """Give the SDK's stderr reader a moment to hand over what the CLI last wrote.

        The SDK reads stderr in a task of its own; a CLI that died may have
        lines in the pipe when its failure arrives. Returns once no line came
        for a short while (at most `_SETTLE_ROUNDS` such waits).
        """
        for _ in range(_SETTLE_ROUNDS):
            seen = self._seen
            await asyncio.sleep(_SETTLE_SECONDS)
            if self._seen == seen:
                return

    def text(self) -> str:
        """The last lines, redacted, at most `TAIL_BYTES`; "" when the CLI wrote none."""
        kept: list[str] = []
        size = _NOTE_BYTES
        for line in reversed(self._lines):
            line = redacted(line)  # before any cut: a cut key would not look like one
            cost = len(line.encode()) + 1
            if size + cost > TAIL_BYTES:
                if not kept:  # one long line: its end
                    budget = TAIL_BYTES - _NOTE_BYTES - 4
                    end = line.encode()[-budget:].decode(errors="ignore")
                    kept.append(f"... {end}")
                break
            kept.append(line)
            size += cost
        skipped = self._seen - len(kept)
        body = "\n".join(reversed(kept))
        if skipped and kept:
            return f"[{skipped} earlier line(s) not shown]\n{body}"
        return body

    def described(self) -> str:
        """A sentence part for an error message: the tail, or that there was none."""
        text = self.text()
        if not text:
            return "it wrote nothing to stderr"
        return f"the last lines of its stderr (credentials redacted):\n{text}"

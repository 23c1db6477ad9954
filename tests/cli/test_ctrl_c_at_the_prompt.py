"""The chat's prompts: Ctrl-C leaves at once, even when it lands before the read;
every line typed ahead is answered in turn.

CPython runs signal handlers between its own steps, so a SIGINT that arrives
after the prompt is printed but before `input()` blocks in `read` used to wait
for the next keypress: CI saw the chat ignore a Ctrl-C sent right after its
prompt (`test_ctrl_c_in_the_chat_stops_the_turn_and_the_next_message_is_answered`).
That window is microseconds wide; here it is made permanent: the prompt's main
thread blocks SIGINT, so the signal is taken by another thread and the main
thread's read is never interrupted. Only a prompt that returns to Python
between slices raises the pending Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pexpect

from support.cli_harness import Term

_SCRIPT = textwrap.dedent(
    """
    import signal, threading
    from rich.console import Console
    from rich.text import Text
    from dex_agents.cli._chat import _typed

    # A thread that takes SIGINT, started before the main thread blocks it.
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        line = _typed(Console(), Text("you › "))
        print("typed:", line)
    except KeyboardInterrupt:
        print("interrupted: Ctrl-C raised")
    """
)


def _spawn(script: str = _SCRIPT) -> Term:
    """`script` run by this Python in a pseudo-terminal."""
    return Term(
        pexpect.spawn(
            sys.executable,
            ["-c", script],
            encoding="utf-8",
            env={**os.environ, "TERM": "xterm"},
            dimensions=(24, 120),
        )
    )


def test_a_ctrl_c_the_reading_thread_never_sees_still_leaves_the_prompt() -> None:
    term = _spawn()
    term.expect("you › ")
    pid = term.child.pid
    assert pid is not None
    os.kill(pid, signal.SIGINT)
    term.expect("interrupted: Ctrl-C raised", timeout=15)
    assert term.wait_exit() == 0


def test_the_prompt_still_returns_the_line_typed() -> None:
    term = _spawn()
    term.expect("you › ")
    term.sendline("say hello")
    term.expect("typed: say hello")
    assert term.wait_exit() == 0


_TYPED_AHEAD = textwrap.dedent(
    """
    import sys, tty
    from rich.console import Console
    from rich.text import Text
    from dex_agents.cli._chat import _typed

    # Non-canonical, as the terminal is while the edit prompt's readline holds
    # it: one read then brings everything typed so far, several lines at once.
    tty.setcbreak(sys.stdin.fileno())
    for _ in range(2):
        print("typed:", _typed(Console(), Text("you › ")))
    """
)


def test_lines_typed_ahead_are_each_answered_without_another_keypress() -> None:
    term = _spawn(_TYPED_AHEAD)
    term.expect("you › ")
    term.child.send("one\ntwo\n")  # one write: the prompt's one read gets both
    term.expect("typed: one")
    term.expect("typed: two", timeout=10)
    assert term.wait_exit() == 0


_CTRL_C_AS_A_STEP_STARTS = textwrap.dedent(
    """
    import asyncio, signal, sys
    from dex_agents.cli._chat import _ChatRunner

    # The race, made certain: a Ctrl-C handled right after `Runner.run` installs
    # its SIGINT handler (at the end of that call), before it zeroes its count.
    install = signal.signal

    def signal_then_ctrl_c(signum, handler):
        old = install(signum, handler)
        if signum == signal.SIGINT and callable(handler) and handler is not old:
            if handler is not signal.default_int_handler:
                handler(signal.SIGINT, None)
        return old

    signal.signal = signal_then_ctrl_c
    runner = _ChatRunner() if sys.argv[1] == "chat" else asyncio.Runner()
    with runner:
        try:
            runner.run(asyncio.sleep(30))
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        except asyncio.CancelledError:
            print("CancelledError")
    """
)


def _step_ended_by(runner: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AS_A_STEP_STARTS, runner],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_ctrl_c_as_a_chat_step_starts_leaves_the_chat() -> None:
    # asyncio's own runner turns that Ctrl-C into a CancelledError (the chat
    # died with a traceback); the chat's runner makes it the Ctrl-C it was.
    assert _step_ended_by("asyncio") == "CancelledError"
    assert _step_ended_by("chat") == "KeyboardInterrupt"

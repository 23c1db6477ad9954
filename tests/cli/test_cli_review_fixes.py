"""Fixes from a review as a demanding user: advice that pastes, and wrong arguments.

Every command a `dex-agents` command suggests carries the options that selected
where the sessions live (`--state-dir`, `--store`), shell-quoted, so pasting it
as printed reaches the same sessions. Wrong arguments (an empty or oversized
ID, text that is not UTF-8, a timeout that is not a sensible number of seconds,
a cursor too large) exit 2 with one line naming the argument, before anything
is sent; a store file that is not SQLite is one line naming it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

from dex_agents.temporal import EmbeddedEngine
from support.cli_harness import (
    DEX_AGENTS,
    Served,
    agent_env,
    assert_one_line_error,
    invoke,
    spawn,
)

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


def _tail(*words: str | Path) -> str:
    """The options as a suggested command ends with them."""
    return " " + shlex.join(str(word) for word in words)


def _suggested(text: str, before: str) -> list[str]:
    """The words of the command printed in `text` after `before` (to its backtick or line end)."""
    match = re.search(re.escape(before) + r"`?([^`\n]+)", text)
    assert match, text
    return shlex.split(match.group(1).strip())


async def test_the_dev_banners_chat_command_pastes_as_is_and_so_does_the_goodbye(
    tmp_path: Path, flow_type: str
) -> None:
    state = tmp_path / "state dir"  # a space: the options must be quoted
    store = tmp_path / "my store.sqlite"
    env = agent_env(tmp_path, flow_type)
    dev = spawn(
        [
            "dev",
            "--agent",
            "agents:flow",
            "--state-dir",
            str(state),
            "--store",
            str(store),
            "--no-ui",
            "--no-web",
        ],
        env,
        tmp_path,
    )
    try:
        dev.expect("ready", timeout=90)
        words = _suggested(dev.expect(r"chat: [^\n]+").group(0), "chat: ")
        assert words[1:] == [
            "chat",
            "my-session",
            "--agent",
            "agents:flow",
            "--state-dir",
            str(state.resolve()),
            "--store",
            str(store.resolve()),
        ]
        # Pasted from another directory, where ./.dex-agents has no server.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        chat = spawn(words[1:], env, elsewhere)
        chat.expect("you › ")
        chat.sendline("say hi")
        chat.expect("said: hi")
        chat.expect("you › ")
        chat.sendline("/quit")
        assert chat.wait_exit() == 0
        back = _suggested(chat.text, "come back with ")
        assert back[1:] == ["chat", "my-session", *words[5:]]
        shown = await invoke("show", *back[2:])
        assert shown.exit_code == 0, shown.output
        assert "said: hi" in shown.stdout
    finally:
        dev.stop()


async def test_approvals_approve_and_show_suggest_commands_that_reach_the_session(
    served: Served, engine: EmbeddedEngine
) -> None:
    sid = f"order 7 {uuid.uuid4().hex[:6]}"  # a space: the ID must be quoted
    await served.sessions.start(
        sid, initial_message='call create_refund {"orderId": "7"}'
    )
    (interrupt,) = (await served.sessions.wait_for_idle(sid)).pending_interrupts
    target = _tail(*served.target)

    shown = await served.run("show", sid)
    assert shown.exit_code == 0, shown.output
    pair = shlex.join([sid, interrupt.interrupt_id])
    assert f"approve: dex-agents approve {pair}{target}" in shown.stdout
    assert f"reject:  dex-agents reject {pair} --message '...'{target}" in shown.stdout

    listed = await served.run("approvals")
    assert listed.exit_code == 0, listed.output
    line = listed.stdout.split("answer one: ", 1)[1].split(" (or reject", 1)[0]
    answer = shlex.split(line)
    assert answer[1:] == ["approve", sid, interrupt.interrupt_id, *served.target]
    approved = await invoke(*answer[1:])
    assert approved.exit_code == 0, approved.output
    follow = _suggested(approved.stdout, "follow the turn: ")
    assert follow[1:] == ["events", sid, "--follow", *served.target]
    events = await invoke(*[w for w in follow[1:] if w != "--follow"])
    assert events.exit_code == 0, events.output
    assert "interrupt_resolved" in events.stdout

    unknown = await served.run("show", "no such session")
    assert_one_line_error(unknown, f"list sessions with `dex-agents sessions{target}`")


async def test_no_server_and_doctor_advice_carry_the_state_dir(
    tmp_path: Path,
) -> None:
    state = tmp_path / "no server here"
    cancelled = await invoke("cancel", "s1", "--state-dir", str(state))
    assert_one_line_error(
        cancelled,
        f"start one with `dex-agents dev --agent module:flow{_tail('--state-dir', state)}`",
    )
    doctor = await invoke("doctor", "--state-dir", str(state), "--timeout", "5")
    assert doctor.exit_code == 1, doctor.output
    assert (
        f"run `dex-agents doctor{_tail('--state-dir', state)}` again" in doctor.stderr
    )

    # The default directory, typed: nothing to repeat.
    default = await invoke("cancel", "s1", "--state-dir", ".dex-agents")
    assert_one_line_error(
        default, "start one with `dex-agents dev --agent module:flow`"
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "0", "86401"])
async def test_a_timeout_that_is_not_a_sensible_number_of_seconds_exits_2(
    value: str, tmp_path: Path
) -> None:
    state = str(tmp_path / "state")
    for command in (
        ["doctor"],
        ["approve", "s1", "intr_1"],
        ["reject", "s1", "intr_1"],
        ["end", "s1"],
        ["cancel", "s1"],
    ):
        result = await invoke(*command, "--timeout", value, "--state-dir", state)
        assert_one_line_error(
            result, f"bad `--timeout {value}`", "from 0.1 to 86400", exit_code=2
        )


async def test_timeout_help_says_its_range_and_approve_help_says_exit_2() -> None:
    for command in ("approve", "reject"):
        result = await invoke(command, "--help")
        assert result.exit_code == 0, result.output
        text = " ".join(result.stdout.split())
        assert "2 a wrong argument" in text
        assert "From 0.1 to 86400 (a day)" in text


async def test_wrong_ids_and_texts_exit_2_naming_the_argument(tmp_path: Path) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    long_id = "x" * 1001
    cases = [
        (["show", ""], "bad `SESSION ''`"),
        (["events", ""], "bad `SESSION ''`"),
        (["approve", "", "intr_1"], "bad `SESSION ''`"),
        (["cancel", ""], "bad `SESSION ''`"),
        (["end", ""], "bad `SESSION ''`"),
        (["chat", ""], "bad `SESSION ''`"),
        (["show", "a\udcff"], "bad `SESSION"),
        (["approve", "s1", ""], "bad `INTERRUPT_ID ''`"),
        (["reject", "s1", long_id], "over the limit of 1000 bytes"),
        (["approve", "s1", "intr_1", "--as", "a\udcff"], "bad `--as"),
        (["cancel", "s1", "--as", "a\udcff"], "bad `--as"),
        (
            ["events", "s1", "--after", "99999999999999999999999"],
            "bad `--after 99999999999999999999999`",
        ),
    ]
    for args, fragment in cases:
        result = await invoke(*args, *state)
        assert_one_line_error(result, fragment, exit_code=2)


def test_a_session_id_that_is_not_utf8_is_one_line_from_the_real_command(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [DEX_AGENTS, "show", b"a\xff", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: bad `SESSION"), done.stderr
    assert "unexpected" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


async def test_a_store_that_is_not_sqlite_is_one_line_naming_it(tmp_path: Path) -> None:
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("these are notes, not a database\n" * 10)
    for args in (["sessions"], ["approvals"], ["show", "s1"], ["events", "s1"]):
        result = await invoke(*args, "--store", str(not_a_store))
        assert_one_line_error(
            result, repr(str(not_a_store)), "is not a dex-agents SQLite store"
        )
    doctor = await invoke("doctor", "--store", str(not_a_store), "--timeout", "5")
    assert "is not a dex-agents SQLite store" in doctor.stdout


async def test_serve_errors_name_its_options(tmp_path: Path) -> None:
    unnamed = await invoke("serve", "--new-token", "")
    assert_one_line_error(unnamed, "bad `--new-token ''`", exit_code=2)
    assert "token for" not in unnamed.stdout

    state = ["--state-dir", str(tmp_path / "state")]
    missing = await invoke(
        "serve", "--tokens-file", str(tmp_path / "absent.toml"), *state
    )
    assert_one_line_error(missing, "absent.toml", "`--tokens-file`")
    assert "create_app" not in missing.stderr

    none = await invoke("serve", *state)
    assert_one_line_error(none, "`--tokens-file FILE`", "`--allow-anonymous-loopback`")
    assert "tokens=" not in none.stderr
    assert "=True" not in none.stderr

"""Options read before a command runs fail as one usage line (exit 2), not a traceback.

`dev`, `worker` and `chat` load `--agent` before their error translation: a
factory (`agent.py:make`) that raised anything but TypeError (a missing
environment variable, a definition it refuses) escaped with a traceback. A
`--store` or state directory under an unknown `~user` raised a bare
RuntimeError from `pathlib`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli_harness import assert_one_line_error, invoke

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

_AGENT = """
import os

from dex_agents import UserError


def needs_env():
    return os.environ["DEX_AGENTS_TEST_NEVER_SET"]


def refuses():
    raise UserError("the support agent needs a `ledger_path`; set LEDGER_PATH")
"""

NO_USER = "~dex_agents_no_such_user_x"


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("needs_env", "KeyError: 'DEX_AGENTS_TEST_NEVER_SET'"),
        (
            "refuses",
            "UserError: the support agent needs a `ledger_path`; set LEDGER_PATH",
        ),
    ],
)
async def test_a_factory_that_raises_is_one_usage_line(
    tmp_path: Path, factory: str, said: str
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(_AGENT)
    ref = f"{agent}:{factory}"
    state = ["--state-dir", str(tmp_path / "state")]
    for args in (
        ["worker", "--agent", ref, *state],
        ["dev", "--agent", ref, *state],
        ["chat", "s1", "--agent", ref, *state],
    ):
        result = await invoke(*args)
        assert_one_line_error(
            result,
            f"bad `--agent {ref}`: building its flow raised {said}",
            "DEX_AGENTS_DEBUG=1",
            exit_code=2,
        )


async def test_a_path_under_an_unknown_user_is_one_usage_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"{NO_USER}/runtime.sqlite"
    for args in (
        ["events", "s1", "--store", store],
        ["sessions", "--store", store],
        ["dev", "--store", store, "--state-dir", str(tmp_path / "state")],
    ):
        result = await invoke(*args)
        assert_one_line_error(
            result,
            f"`--store` {store!r} starts with `{NO_USER}`",
            "no user 'dex_agents_no_such_user_x' exists here",
            "write the path in full",
            exit_code=2,
        )
    state = f"{NO_USER}/state"
    result = await invoke("sessions", "--state-dir", state)
    assert_one_line_error(
        result, f"`--state-dir` {state!r} starts with `{NO_USER}`", exit_code=2
    )
    monkeypatch.setenv("DEX_AGENTS_STATE_DIR", state)
    result = await invoke("sessions")
    assert_one_line_error(
        result, f"`DEX_AGENTS_STATE_DIR` {state!r} starts with `{NO_USER}`", exit_code=2
    )

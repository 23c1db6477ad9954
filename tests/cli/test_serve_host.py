"""`serve --allow-anonymous-loopback` takes only a loopback `--host`, as the web app names one.

The command and the app's `Host` check share one parser
(`web._auth.is_loopback_name`): `localhost` and loopback addresses pass (the
command then goes on, here to find no server), any other host exits 2 naming it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result

from support.cli_harness import assert_one_line_error, invoke

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def _serve_anonymously(host: str, tmp_path: Path) -> Result:
    """`dex-agents serve --allow-anonymous-loopback --host HOST` on an empty state dir."""
    return await invoke(
        "serve",
        "--allow-anonymous-loopback",
        "--host",
        host,
        "--state-dir",
        str(tmp_path / "state"),
    )


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "192.168.1.10", "example.com", "localhost.example.com", "::"]
)
async def test_anonymous_loopback_on_another_host_exits_2_naming_it(
    host: str, tmp_path: Path
) -> None:
    result = await _serve_anonymously(host, tmp_path)
    assert_one_line_error(
        result,
        f"--allow-anonymous-loopback needs a loopback --host, not {host!r}",
        "use a token file instead",
        exit_code=2,
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
async def test_anonymous_loopback_on_a_loopback_host_is_let_through(
    host: str, tmp_path: Path
) -> None:
    result = await _serve_anonymously(host, tmp_path)
    # Past the host check: no server runs for this state directory.
    assert_one_line_error(result, "no Temporal server is running for state directory")

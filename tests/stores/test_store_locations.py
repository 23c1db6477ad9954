"""How a store is named: files, PostgreSQL URLs and conninfo, and nothing in between."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dex_agents import UserError
from dex_agents.cli._app import main
from dex_agents.stores._open import is_database_url, open_runtime_store, redacted_store


@pytest.mark.parametrize(
    "location",
    ["postgresql://app@db/dex", "POSTGRES://app@db/dex", "host=db.internal dbname=dex"],
)
def test_postgres_urls_and_conninfo_name_a_database(location: str) -> None:
    assert is_database_url(location)


@pytest.mark.parametrize("location", ["runtime.sqlite", "/srv/state/runtime.sqlite"])
def test_paths_name_a_file(location: str) -> None:
    assert not is_database_url(location)


async def test_a_url_of_another_scheme_is_refused_not_taken_for_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    with pytest.raises(
        UserError, match="scheme 'postgresql\\+psycopg' is not supported"
    ):
        await open_runtime_store("postgresql+psycopg://app@db/dex")
    assert list(workdir.iterdir()) == [], "no file was created"


def test_passwords_never_reach_messages() -> None:
    assert redacted_store("postgresql://app:s3cret@db:5432/dex") == (
        "postgresql://app:***@db:5432/dex"
    )
    assert redacted_store("host=db password=s3cret dbname=dex") == (
        "host=db password=*** dbname=dex"
    )
    assert redacted_store("runtime.sqlite") == "runtime.sqlite"


def test_the_command_line_refuses_an_unknown_scheme_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["sessions", "--store", "postgresql+psycopg://app:s3cret@db/dex"],
        env={"DEX_AGENTS_STATE_DIR": str(tmp_path / "state")},
    )
    assert result.exit_code == 1, result.output
    assert "scheme 'postgresql+psycopg' is not supported" in result.output
    assert "s3cret" not in result.output
    assert "Traceback" not in result.output

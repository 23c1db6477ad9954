"""`dex-agents doctor`: one line per check, the fix on each failing one, exit 1 if any.

Every test runs the command as a user does, in a process of its own, next to
the run's dev server (the `engine` fixture), a writable store, the bundled CLI
and the hermetic environment's key; then takes away one thing at a time.
An agent module written per test gives `--agent` a `cli_path` and an S3 media
store (moto's server, signatures checked) when the test wants them.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from claude_agent_sdk._cli_version import __cli_version__

from dex_agents._scripted._scripted_model import scripted_model_env
from dex_agents.cli._doctor import TESTED_CLI_VERSION
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine
from dex_agents.testing._hermetic import bundled_cli_path
from dex_agents.testing._postgres_server import PostgresTestServer
from support.cli_harness import DEX_AGENTS
from support.fake_cli._fake_cli_usage import CLI_VERSION as FAKE_CLI_VERSION
from support.moto_s3 import MotoS3, moto_s3
from support.postgres_support import postgres_or_skip

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

CHECKS = ["claude_cli", "credentials", "temporal", "runtime_store", "media_store"]
"""The checks, in the order of their lines."""
_REAL_CLI_REQUIRED = os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1"
"""Read before `cli_env` scrubs the `DEX_AGENTS_` variables."""
BUCKET = "media"

AGENT = """
import os

from claude_agent_sdk import ClaudeAgentOptions

from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow

media_store = None
if os.environ.get("DOCTOR_TEST_S3"):
    from dex_agents.s3 import S3MediaStore

    media_store = S3MediaStore(
        os.environ["DOCTOR_TEST_BUCKET"], endpoint_url=os.environ["DOCTOR_TEST_S3"]
    )

flow = create_claude_agent_session_flow(
    ClaudeAgentDefinition(
        options=ClaudeAgentOptions(cli_path=os.environ.get("DOCTOR_TEST_CLI") or None),
        media_store=media_store,
    ),
    "DoctorAgent",
)
"""


@pytest.fixture(autouse=True)
def real_cli() -> None:
    """The good setup is the bundled CLI; a wheel without it cannot have one."""
    if bundled_cli_path() is None:
        if _REAL_CLI_REQUIRED:
            pytest.fail("the bundled Claude Code CLI is missing")
        pytest.skip("the bundled Claude Code CLI is missing")


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3]:
    """Moto's S3 server with the bucket the agent's media store names."""
    with moto_s3() as server:
        server.client().create_bucket(Bucket=BUCKET)
        yield server


@dataclass(frozen=True)
class Done:
    """A finished `dex-agents doctor`: its status, its lines and its stderr."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> dict[str, str]:
        """Each check's line, by check name (there must be exactly one each)."""
        lines = self.stdout.splitlines()
        assert len(lines) == len(CHECKS), self.stdout + self.stderr
        return dict(zip(CHECKS, lines, strict=True))

    def line(self, check: str) -> str:
        return self.lines[check]


async def doctor(
    *args: str,
    env: Mapping[str, str] | None = None,
    unset: tuple[str, ...] = (),
) -> Done:
    """Run `dex-agents doctor ARGS` in the test's environment, less `unset`, plus `env`."""
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    environ |= env or {}
    done = await asyncio.to_thread(
        subprocess.run,
        [DEX_AGENTS, "doctor", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return Done(done.returncode, done.stdout, done.stderr)


def good_target(engine: EmbeddedEngine, tmp_path: Path) -> list[str]:
    """The run's dev server and a store in this test's directory."""
    return ["--state-dir", str(engine.state_dir), "--store", str(tmp_path / "rt.db")]


def agent(tmp_path: Path) -> list[str]:
    """`--agent` naming the test agent module (configured by `DOCTOR_TEST_*`)."""
    module = tmp_path / "doctor_agent.py"
    module.write_text(AGENT)
    return ["--agent", f"{module}:flow"]


def media_env(endpoint: str, bucket: str = BUCKET, **aws: str) -> dict[str, str]:
    return {"DOCTOR_TEST_S3": endpoint, "DOCTOR_TEST_BUCKET": bucket, **aws}


def free_port() -> int:
    """A port nothing listens on: bound once for its number, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_fails_with(done: Done, check: str, *fragments: str) -> str:
    """Only `check` failed, its line says the fragments and a fix; exit code 1."""
    assert done.returncode == 1, done.stdout + done.stderr
    line = done.line(check)
    assert line.startswith("✗ "), line
    assert " — fix: " in line, line
    for fragment in fragments:
        assert fragment in line, line
    others = [text for name, text in done.lines.items() if name != check]
    assert not any(text.startswith("✗") for text in others), done.stdout
    assert done.stderr.startswith("error: 1 of 5 checks failed"), done.stderr
    assert f"({check})" in done.stderr, done.stderr
    return line


def files(directory: Path) -> list[Path]:
    """Every file and directory under `directory`, but the agent module's bytecode."""
    return sorted(p for p in directory.rglob("*") if "__pycache__" not in p.parts)


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    return [name for (name,) in rows]


# -- a good setup ----------------------------------------------------------------


async def test_a_good_setup_passes_every_check_and_leaves_nothing_behind(
    engine: EmbeddedEngine, tmp_path: Path, s3: MotoS3
) -> None:
    store = await SQLiteRuntimeStore.open(tmp_path / "rt.db")
    await store.close()
    args = [*good_target(engine, tmp_path), *agent(tmp_path)]
    before = (tables(tmp_path / "rt.db"), files(tmp_path))
    env = {**media_env(s3.endpoint_url), **s3.env()}

    done = await doctor(*args, env=env)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    assert all(line.startswith("✓ ") for line in done.lines.values()), done.stdout
    assert "— fix:" not in done.stdout
    lines = done.lines
    assert lines["claude_cli"].startswith(
        f"✓ Claude Code CLI {TESTED_CLI_VERSION} (bundled with claude-agent-sdk "
    )
    assert lines["claude_cli"].endswith(str(bundled_cli_path()))
    assert "ANTHROPIC_API_KEY is set" in lines["credentials"]
    assert f"Temporal at {engine.address}, namespace default" in lines["temporal"]
    assert lines["runtime_store"] == (
        f"✓ runtime store {tmp_path / 'rt.db'}: writable (SQLite)"
    )
    assert lines["media_store"] == (
        f"✓ media store of flow DoctorAgent: S3 bucket {BUCKET!r} at "
        f"{s3.endpoint_url}: reachable"
    )

    as_json = await doctor(*args, "--json", env=env)

    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["ok"] is True
    assert [(c["check"], c["status"]) for c in report["checks"]] == [
        (name, "pass") for name in CHECKS
    ]
    cli = report["checks"][0]
    assert (cli["version"], cli["tested_version"]) == (__cli_version__,) * 2
    assert report["checks"][2]["address"] == engine.address
    # The probes rolled back: no table, no row, no file of theirs is left.
    assert (tables(tmp_path / "rt.db"), files(tmp_path)) == before
    assert list(s3.client().list_objects_v2(Bucket=BUCKET).get("Contents", [])) == []


async def test_without_an_agent_the_media_store_is_skipped_and_no_store_is_created(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    store = tmp_path / "not-yet" / "runtime.sqlite"
    before = files(tmp_path)

    done = await doctor("--state-dir", str(engine.state_dir), "--store", str(store))

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.line("runtime_store") == (
        f"✓ runtime store {store}: not there yet; the worker creates it ({tmp_path} "
        "can be written)"
    )
    assert done.line("media_store").startswith("– media store: not checked")
    assert "`--agent`" in done.line("media_store")
    assert files(tmp_path) == before


def test_the_tested_cli_is_the_one_the_pinned_sdk_bundles() -> None:
    # Bumping the claude-agent-sdk pin means testing its CLI, then saying so here.
    assert TESTED_CLI_VERSION == __cli_version__ == FAKE_CLI_VERSION


# -- the Claude Code CLI -----------------------------------------------------------


async def test_a_missing_cli_fails_with_how_to_get_one(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    missing = tmp_path / "bin" / "claude"

    done = await doctor(*good_target(engine, tmp_path), "--cli", str(missing))

    line = assert_fails_with(
        done, "claude_cli", f"Claude Code CLI: not found at {missing} (--cli)"
    )
    assert "pass `--cli` the path of a Claude Code CLI" in line


def fake_cli(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "claude"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


async def test_a_cli_of_another_version_is_a_warning_not_a_failure(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    cli = fake_cli(tmp_path, 'echo "2.0.1 (Claude Code)"')
    args = [*good_target(engine, tmp_path), *agent(tmp_path)]

    done = await doctor(*args, env={"DOCTOR_TEST_CLI": str(cli)})

    assert done.returncode == 0, done.stdout + done.stderr
    line = done.line("claude_cli")
    assert line.startswith(
        f"! Claude Code CLI 2.0.1 (cli_path of flow DoctorAgent): {cli}; the adapter "
        f"is tested with {TESTED_CLI_VERSION} — fix: "
    ), line
    assert "claude-agent-sdk" in line
    assert done.line("media_store") == (
        "✓ media store: none configured (flow DoctorAgent takes no images)"
    )


async def test_a_cli_that_never_answers_fails_within_the_timeout(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    cli = fake_cli(tmp_path, "exec sleep 300")

    done = await doctor(
        *good_target(engine, tmp_path), "--cli", str(cli), "--timeout", "1"
    )

    assert_fails_with(
        done, "claude_cli", f"at {cli} (--cli): `--version` gave no answer within 1 s"
    )


# -- model credentials -------------------------------------------------------------


async def test_no_api_key_fails_with_how_to_set_one(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    done = await doctor(*good_target(engine, tmp_path), unset=("ANTHROPIC_API_KEY",))

    line = assert_fails_with(
        done, "credentials", "✗ model credentials: none in the environment"
    )
    assert "export ANTHROPIC_API_KEY=<your key> where the worker runs" in line
    assert " dev` and " in line  # ... which run without one, on the scripted model


@pytest.mark.parametrize(
    ("env", "said"),
    [
        pytest.param(
            {"ANTHROPIC_AUTH_TOKEN": "t0ken"}, "ANTHROPIC_AUTH_TOKEN is set", id="token"
        ),
        pytest.param(
            {"CLAUDE_CODE_USE_BEDROCK": "1"},
            "Amazon Bedrock (CLAUDE_CODE_USE_BEDROCK=1)",
            id="bedrock",
        ),
        pytest.param(
            scripted_model_env("http://127.0.0.1:9", Path("/nonexistent/claude")),
            "the scripted model at http://127.0.0.1:9",
            id="scripted-model",
        ),
    ],
)
async def test_other_credentials_pass(
    engine: EmbeddedEngine,
    tmp_path: Path,
    env: dict[str, str],
    said: str,
) -> None:
    done = await doctor(
        *good_target(engine, tmp_path), env=env, unset=("ANTHROPIC_API_KEY",)
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.line("credentials").startswith(f"✓ model credentials: {said}")


# -- Temporal ----------------------------------------------------------------------


async def test_an_address_with_nothing_listening_fails_with_the_address(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{free_port()}"

    done = await doctor(
        "--address", address, "--store", str(tmp_path / "rt.db"), "--timeout", "3"
    )

    line = assert_fails_with(
        done, "temporal", f"✗ Temporal at {address} (namespace default): connection"
    )
    assert "check `--address` (DEX_AGENTS_TEMPORAL_ADDRESS)" in line


async def test_an_address_option_takes_tls_and_the_api_key_from_the_environment(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    """`--address` with DEX_AGENTS_TEMPORAL_TLS exported connected in plaintext."""
    target = ["--address", engine.address, "--store", str(tmp_path / "rt.db")]
    plain = await doctor(*target, "--timeout", "5")
    assert plain.line("temporal").startswith("✓ "), plain.stdout

    # The dev server speaks no TLS: a TLS connection to it must fail.
    tls = await doctor(
        *target, "--timeout", "5", env={"DEX_AGENTS_TEMPORAL_TLS": "true"}
    )
    assert_fails_with(tls, "temporal", f"✗ Temporal at {engine.address}")
    keyed = await doctor(
        *target, "--timeout", "5", env={"DEX_AGENTS_TEMPORAL_API_KEY": "k"}
    )  # an API key turns TLS on, and the failure says so
    assert_fails_with(
        keyed,
        "temporal",
        f"✗ Temporal at {engine.address}",
        "which the API key turns on",
    )
    wrong = await doctor(
        *target, "--timeout", "5", env={"DEX_AGENTS_TEMPORAL_TLS": "maybe"}
    )
    assert_fails_with(
        wrong,
        "temporal",
        "`DEX_AGENTS_TEMPORAL_TLS` is 'maybe' — fix: set it to `true`",
    )


async def test_no_dev_server_fails_with_how_to_start_one_and_starts_none(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"

    done = await doctor("--state-dir", str(state))

    line = assert_fails_with(
        done,
        "temporal",
        f"✗ Temporal: no Temporal server is running for state directory {str(state)!r}",
    )
    assert "dex-agents dev" in line.split(" — fix: ", 1)[1]
    assert not state.exists()


# -- the runtime store -------------------------------------------------------------


@pytest.mark.parametrize("case", ["parent is a file", "not a database"])
async def test_a_store_that_cannot_be_written_fails_with_where_to_put_it(
    engine: EmbeddedEngine, tmp_path: Path, case: str
) -> None:
    # Root writes through any permission, so both cases fail for root too.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory, not a database\n")
    if case == "parent is a file":
        store = blocker / "runtime.sqlite"
        said = f"cannot be created: {blocker} is a file, not a directory"
    else:
        store, said = blocker, "it is not a dex-agents SQLite store"

    done = await doctor("--state-dir", str(engine.state_dir), "--store", str(store))

    line = assert_fails_with(done, "runtime_store", f"✗ runtime store {store}: {said}")
    assert "pass `--store`" in line and "`--state-dir`" in line
    assert blocker.read_text() == "not a directory, not a database\n"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresTestServer]:
    with postgres_or_skip() as server:
        yield server


async def test_a_postgres_store_is_written_in_a_transaction_that_never_commits(
    engine: EmbeddedEngine, postgres: PostgresTestServer
) -> None:
    name = f"doctor_{uuid4().hex[:8]}"
    postgres.create_database(name)
    dsn = postgres.database_dsn(name)

    done = await doctor("--state-dir", str(engine.state_dir), "--store", dsn)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.line("runtime_store").startswith("✓ runtime store PostgreSQL ")
    assert done.line("runtime_store").endswith(": writable (PostgreSQL)")
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM dex_agents_event_cursors").fetchone()
    assert row == (0,)

    gone = f"postgresql://postgres@127.0.0.1:{free_port()}/{name}"
    unreachable = await doctor("--state-dir", str(engine.state_dir), "--store", gone)

    assert_fails_with(
        unreachable,
        "runtime_store",
        "cannot connect to the PostgreSQL runtime store",
        "check the DSN",
    )


async def test_the_command_to_run_again_keeps_the_agent_and_leaves_the_password_out(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    """`***` in a pasted `--store` failed to sign in, and `--agent` was left out."""
    port = free_port()
    store = f"postgresql://agents:s3cret@127.0.0.1:{port}/agents"
    module = agent(tmp_path)
    done = await doctor(
        *module, "--state-dir", str(engine.state_dir), "--store", store,
        env=media_env("http://127.0.0.1:1"),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    assert "agents:***@" in done.line("runtime_store")  # what was used, redacted
    again = done.stderr.partition("then run `")[2].partition("` again")[0]
    assert again == (
        f"{DEX_AGENTS} doctor --agent {module[1]} --state-dir {engine.state_dir} "
        f"--store postgresql://agents@127.0.0.1:{port}/agents"
    )  # pasted as is, libpq takes the password from PGPASSWORD or ~/.pgpass


# -- the media store ---------------------------------------------------------------


@pytest.mark.parametrize("case", ["nothing listens", "no such bucket", "wrong secret"])
async def test_a_media_store_that_cannot_be_reached_fails_with_what_to_check(
    engine: EmbeddedEngine, tmp_path: Path, s3: MotoS3, case: str
) -> None:
    if case == "nothing listens":
        endpoint = f"http://127.0.0.1:{free_port()}"
        env = media_env(endpoint, **{**s3.env(), "AWS_SECRET_ACCESS_KEY": "x"})
        said, fix = "cannot connect", "check the endpoint (`endpoint_url`"
    elif case == "no such bucket":
        endpoint = s3.endpoint_url
        env = media_env(endpoint, "absent", **s3.env())
        said, fix = "the bucket does not exist", "aws s3 mb s3://absent"
    else:
        endpoint = s3.endpoint_url
        env = media_env(endpoint, **{**s3.env(), "AWS_SECRET_ACCESS_KEY": "wrong"})
        said, fix = "access denied", "check the AWS credentials"
    bucket = env["DOCTOR_TEST_BUCKET"]

    done = await doctor(*good_target(engine, tmp_path), *agent(tmp_path), env=env)

    line = assert_fails_with(
        done,
        "media_store",
        f"✗ media store of flow DoctorAgent: S3 bucket {bucket!r} at {endpoint}: {said}",
    )
    assert fix in line.split(" — fix: ", 1)[1], line

"""A throwaway PostgreSQL server for tests: a real cluster, started and removed by the test.

Tests of the PostgreSQL runtime store talk to the real server, not a stand-in,
so this starts one from the machine's PostgreSQL binaries (Debian's
`postgresql` package puts them in `/usr/lib/postgresql/<version>/bin`): initdb
into a fresh directory, trust authentication, listening on 127.0.0.1 only, and
fsync off because the data is thrown away.

PostgreSQL refuses to run as root, so under root (as in CI) the cluster belongs
to the `postgres` system user that the package creates.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Self, TypedDict

_BIN_ENV = "DEX_AGENTS_POSTGRES_BIN"


class _RunAs(TypedDict, total=False):
    """The `subprocess.run` keywords that run a command as another user."""

    user: int
    group: int


class PostgresNotAvailable(RuntimeError):
    """The machine has no PostgreSQL server binaries (or no user that may run them)."""


def postgres_bin_dir() -> Path:
    """The directory holding `initdb` and `pg_ctl`.

    Raises:
        PostgresNotAvailable: None was found; the message says how to get one.
    """
    configured = os.environ.get(_BIN_ENV)
    candidates = [configured] if configured else []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent))
    installed = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += [
        str(p)
        for p in sorted(
            installed,
            key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
            reverse=True,
        )
    ]
    for candidate in candidates:
        directory = Path(candidate)
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    raise PostgresNotAvailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) found; install them "
        f"(`apt-get install postgresql`) or set {_BIN_ENV} to their directory"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresTestServer:
    """A PostgreSQL cluster in a temporary directory, for one test run.

    Use it as a context manager; `dsn` connects as the superuser `postgres`,
    and `create_database` gives each test its own database.
    """

    def __init__(self) -> None:
        self._bin = postgres_bin_dir()
        self._dir: Path | None = None
        self.port = 0
        self._user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._user = pwd.getpwnam("postgres")
            except KeyError as e:
                raise PostgresNotAvailable(
                    "PostgreSQL will not run as root and there is no `postgres` "
                    "user; install the postgresql package or run as another user"
                ) from e

    @property
    def dsn(self) -> str:
        """The connection string of the `postgres` database."""
        return self.database_dsn("postgres")

    def database_dsn(self, name: str) -> str:
        """The connection string of database `name` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, tool: str, *args: str) -> None:
        """Run the server's `tool` (`initdb`, `pg_ctl`) on its data directory."""
        assert self._dir is not None, "the server was never started"
        kwargs: _RunAs = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid}
        result = subprocess.run(
            [str(self._bin / tool), "-D", str(self._dir / "data"), *args],
            capture_output=True,
            text=True,
            check=False,
            **kwargs,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{tool} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )

    def start(self) -> None:
        """Create the cluster and start the server; returns once it accepts connections."""
        # Not under pytest's tmp_path: its parents are private to root.
        self._dir = Path(tempfile.mkdtemp(prefix="dex-pg-"))
        try:
            if self._user is not None:
                os.chown(self._dir, self._user.pw_uid, self._user.pw_gid)
            self._run(
                "initdb",
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            )
            self.port = _free_port()
            self._pg_ctl("start")
        except BaseException:
            self.stop()
            raise

    def restart(self) -> None:
        """Restart the server on the same port and data, as a failover or upgrade would.

        Every open connection is dropped; clients must reconnect.
        """
        self._pg_ctl("restart", "-m", "fast")

    def _pg_ctl(self, action: str, *extra: str) -> None:
        assert self._dir is not None, "the server was never started"
        options = (
            f"-p {self.port} -k {self._dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-l",
            str(self._dir / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            *extra,
            action,
        )

    def stop(self) -> None:
        """Stop the server at once and remove its files."""
        if self._dir is None:
            return
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-m", "immediate", "-w", "stop")
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    def create_database(self, name: str) -> str:
        """Create database `name` and return its connection string."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.database_dsn(name)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

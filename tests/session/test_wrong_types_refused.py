"""Arguments of the wrong type are refused where they are passed, naming the fix.

Each of these was accepted, or failed far away with a bare AttributeError or
TypeError: one flow passed without its list, a store passed by its location,
an address passed for the engine's config, seconds for a timedelta, a Claude
agent definition for a runner, a URL for a SQLite file.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from claude_agent_sdk import ClaudeAgentOptions
from temporalio.client import Client

from dex_agents import (
    EngineConfig,
    InvalidArgumentError,
    SessionPlugin,
    create_agent_session_flow,
    create_worker,
    open_engine,
)
from dex_agents.claude import ClaudeAgentDefinition
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config

_NO_CLIENT = cast(Client, object())  # the arguments are checked before the client


@pytest.fixture
def flow(tmp_path: Path) -> AgentSessionFlow:
    return ledger_flow(ledger_config(tmp_path, "WrongTypes"))


def test_one_flow_without_its_list_is_refused(
    flow: AgentSessionFlow, tmp_path: Path
) -> None:
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    with pytest.raises(InvalidArgumentError) as plugin:
        SessionPlugin(cast(Any, flow), store=store)
    assert plugin.value.argument == "flows"
    assert "`flows` must be a list of `AgentSessionFlow`s, got AgentSessionFlow" in str(
        plugin.value
    )
    assert "wrap the one flow in a list: `SessionPlugin([flow], ...)`" in str(
        plugin.value
    )
    with pytest.raises(InvalidArgumentError) as worker:
        create_worker(_NO_CLIENT, cast(Any, flow), store=store)
    assert "wrap the one flow in a list: `create_worker([flow], ...)`" in str(
        worker.value
    )
    with pytest.raises(InvalidArgumentError) as named:
        SessionPlugin(cast(Any, ["WrongTypes"]), store=store)
    assert "`flows[0]` must be an `AgentSessionFlow`, got str 'WrongTypes'" in str(
        named.value
    )
    assert "not its name" in str(named.value)


@pytest.mark.parametrize("location", ["runtime.sqlite", Path("runtime.sqlite")])
def test_a_store_passed_by_its_location_is_refused(
    flow: AgentSessionFlow, location: object
) -> None:
    for build in (
        lambda: SessionPlugin([flow], store=cast(Any, location)),
        lambda: create_worker(_NO_CLIENT, [flow], store=cast(Any, location)),
    ):
        with pytest.raises(InvalidArgumentError) as caught:
            build()
        assert caught.value.argument == "store"
        message = str(caught.value)
        assert "`store` must be a runtime store" in message
        assert "runtime.sqlite" in message
        assert "open_runtime_store(location)" in message


def test_an_address_for_the_engine_config_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        open_engine(cast(Any, "localhost:7233"))
    assert caught.value.argument == "config"
    assert "`config` must be an `EngineConfig` or None, got str 'localhost:7233'" in (
        str(caught.value)
    )
    assert "use EngineConfig(address='localhost:7233')" in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "argument", "fix"),
    [
        ({"connect_timeout": 10}, "connect_timeout", "timedelta(seconds=10) if you"),
        ({"connect_timeout": timedelta(0)}, "connect_timeout", "timedelta(seconds=10)"),
        ({"connect_timeout": "10s"}, "connect_timeout", "timedelta(seconds=10)"),
        ({"address": ""}, "address", 'EngineConfig(address="'),
        ({"address": 7233}, "address", 'EngineConfig(address="'),
        ({"namespace": None}, "namespace", 'namespace="default"'),
        ({"tls": "yes"}, "tls", "tls=True"),
        ({"api_key": 12345}, "api_key", "as a str"),
    ],
)
def test_a_bad_engine_config_field_is_refused_when_built(
    fields: dict[str, object], argument: str, fix: str
) -> None:
    values: dict[str, Any] = {"address": "localhost:7233", **fields}
    with pytest.raises(InvalidArgumentError) as caught:
        EngineConfig(**values)
    assert caught.value.argument == argument
    assert f"`{argument}` must be" in str(caught.value)
    assert fix in str(caught.value)
    assert "12345" not in str(caught.value), "an API key is never shown"


def test_a_claude_agent_definition_for_a_runner_names_its_builder() -> None:
    agent = ClaudeAgentDefinition(options=ClaudeAgentOptions())
    with pytest.raises(InvalidArgumentError) as caught:
        create_agent_session_flow(cast(Any, agent), "Support")
    assert caught.value.argument == "runner"
    assert "`runner` must be an `AgentFrameworkRunner`, got ClaudeAgentDefinition" in (
        str(caught.value)
    )
    assert "`create_claude_agent_session_flow(agent, flow_type)`" in str(caught.value)
    with pytest.raises(InvalidArgumentError) as other:
        create_agent_session_flow(cast(Any, "my_runner"), "Support")
    assert "it has no `build_user_message`, `run_model`" in str(other.value)


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        (
            "postgresql://app:secret@db.example/app",
            "postgresql://app:***@db.example/app",
        ),
        ("host=db.example dbname=app password=secret", "password=***"),
        ("s3://bucket/runtime.sqlite", "s3://bucket/runtime.sqlite"),
    ],
)
def test_a_url_for_a_sqlite_store_is_refused_not_a_local_file(
    location: str, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(InvalidArgumentError) as caught:
        SQLiteRuntimeStore(location)
    message = str(caught.value)
    assert caught.value.argument == "path"
    assert "`path` must be a SQLite file path, not a URL" in message
    assert shown in message and "secret" not in message
    assert "open_runtime_store(location)" in message
    assert list(here.iterdir()) == [], "no local file made of the URL"


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, "10", True, None])
def test_a_busy_timeout_must_be_a_positive_finite_number(
    timeout: object, tmp_path: Path
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        SQLiteRuntimeStore(tmp_path / "runtime.sqlite", busy_timeout=cast(Any, timeout))
    assert caught.value.argument == "busy_timeout"
    assert "`busy_timeout` must be a positive, finite number of seconds" in str(
        caught.value
    )
    assert "use busy_timeout=10.0" in str(caught.value)

"""The fake-CLI suites' one fixture: the dev server plus the test's own names."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fake_suite_rig import SuiteEnv
from temporalio.client import Client

from dex_agents.temporal import EmbeddedEngine


@pytest.fixture
def suite(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> SuiteEnv:
    """The shared dev server, a fresh flow type (and task queue), a temp dir."""
    return SuiteEnv(
        engine=engine, client=client, tmp_path=tmp_path, flow_type=flow_type
    )

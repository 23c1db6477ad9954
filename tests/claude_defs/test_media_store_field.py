"""`ClaudeAgentDefinition(media_store=...)` must be a MediaStore, not its location.

A location (`"s3://bucket"`) was accepted, then failed at the first image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from claude_agent_sdk import ClaudeAgentOptions

from dex_agents import InvalidOptionError
from dex_agents.claude import ClaudeAgentDefinition
from dex_agents.stores import DirectoryMediaStore


def test_a_media_store_location_is_refused_when_defined(tmp_path: Path) -> None:
    for media in ["s3://bucket", Path("images"), object()]:
        with pytest.raises(InvalidOptionError) as caught:
            ClaudeAgentDefinition(
                options=ClaudeAgentOptions(), media_store=cast(Any, media)
            )
        message = str(caught.value)
        assert (
            "`media_store` must be a MediaStore (with `put_image` and `get_image`)"
            in message
        )
        assert f"got {type(media).__name__}" in message
        assert "use media_store=DirectoryMediaStore(path)" in message
    # A MediaStore itself is accepted.
    store = DirectoryMediaStore(tmp_path / "images")
    agent = ClaudeAgentDefinition(options=ClaudeAgentOptions(), media_store=store)
    assert agent.media_store is store

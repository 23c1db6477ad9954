"""Every media store passes the conformance suite; S3 runs over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import boto3
import pytest

from dex_agents.s3 import S3MediaStore
from dex_agents.stores import (
    DirectoryMediaStore,
    InMemoryMediaStore,
    run_media_store_conformance,
)
from dex_agents.testing import S3TestServer


async def test_in_memory_store() -> None:
    await run_media_store_conformance(InMemoryMediaStore)


async def test_directory_store(tmp_path: Path) -> None:
    await run_media_store_conformance(
        lambda: DirectoryMediaStore(tmp_path / str(uuid4()))
    )


async def test_directory_store_is_shared_by_path(tmp_path: Path) -> None:
    ref = await DirectoryMediaStore(tmp_path).put_image(b"\x89PNG", "image/png")
    assert (tmp_path / ref.key).read_bytes() == b"\x89PNG"
    assert await DirectoryMediaStore(tmp_path).get_image(ref) == b"\x89PNG"


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3TestServer]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = S3TestServer()
    server.start()
    yield server
    server.close()


def _client(server: S3TestServer) -> object:
    # boto3 ships no type information.
    return boto3.client(  # pyright: ignore[reportUnknownMemberType]
        "s3",
        endpoint_url=server.endpoint_url,
        config=boto3.session.Config(s3={"addressing_style": "path"}),  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    )


async def test_s3_store_over_http(s3_server: S3TestServer) -> None:
    client = _client(s3_server)

    def make() -> S3MediaStore:
        bucket = f"media-{uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
        return S3MediaStore(bucket, prefix="sessions/", client=client)

    await run_media_store_conformance(make)
    puts = [path for method, path in s3_server.requests if method == "PUT"]
    assert any("/sessions/" in path for path in puts), puts


async def test_s3_store_default_client_uses_endpoint(s3_server: S3TestServer) -> None:
    _client(s3_server).create_bucket(Bucket="agent-media")  # type: ignore[attr-defined]
    store = S3MediaStore("agent-media", endpoint_url=s3_server.endpoint_url)
    ref = await store.put_image(b"GIF89a", "image/gif")
    assert s3_server.buckets["agent-media"][ref.key] == (b"GIF89a", "image/gif")
    assert await store.get_image(ref) == b"GIF89a"

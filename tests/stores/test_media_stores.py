"""Every media store passes the conformance suite; S3 runs over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from botocore.exceptions import ClientError

from dex_agents.s3 import S3MediaStore
from dex_agents.stores import DirectoryMediaStore
from dex_agents.stores._media import InMemoryMediaStore
from dex_agents.testing import run_media_store_conformance
from support.moto_s3 import MotoS3, moto_s3


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


@pytest.fixture(scope="module")
def s3_server() -> Iterator[MotoS3]:
    with moto_s3() as server:
        yield server


async def test_s3_store_over_http(s3_server: MotoS3) -> None:
    client = s3_server.client()
    buckets: list[str] = []

    def make() -> S3MediaStore:
        bucket = f"media-{uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        buckets.append(bucket)
        return S3MediaStore(bucket, prefix="sessions/", client=client)

    await run_media_store_conformance(make)
    keys = [
        obj["Key"]
        for bucket in buckets
        for obj in client.list_objects_v2(Bucket=bucket).get("Contents", [])
    ]
    assert keys, buckets
    assert all(key.startswith("sessions/") for key in keys), keys


async def test_s3_store_default_client_uses_endpoint_and_environment(
    s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    s3_server.client().create_bucket(Bucket="agent-media")
    store = S3MediaStore("agent-media", endpoint_url=s3_server.endpoint_url)
    ref = await store.put_image(b"GIF89a", "image/gif")
    stored = s3_server.client().get_object(Bucket="agent-media", Key=ref.key)
    assert stored["Body"].read() == b"GIF89a"
    assert stored["ContentType"] == "image/gif"
    assert await store.get_image(ref) == b"GIF89a"


async def test_s3_store_requests_are_signed(
    s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The emulator checks signatures: a wrong secret is refused, as on S3."""
    s3_server.client().create_bucket(Bucket="signed-media")
    good = S3MediaStore("signed-media", client=s3_server.client())
    ref = await good.put_image(b"\x89PNG", "image/png")
    forged = S3MediaStore("signed-media", client=s3_server.client(secret="wrong"))
    with pytest.raises(ClientError, match="SignatureDoesNotMatch"):
        await forged.get_image(ref)

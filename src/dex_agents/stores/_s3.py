"""The S3 media store; `dex_agents.s3` is its public home (extra `[s3]`)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, cast

try:
    # boto3 and botocore ship no type information (and no stubs are installed).
    import boto3  # pyright: ignore[reportMissingTypeStubs]
    from botocore.exceptions import ClientError  # pyright: ignore[reportMissingTypeStubs]
except ImportError as e:  # pragma: no cover - the import guard needs boto3 missing
    raise ImportError(
        '`dex_agents.s3` needs the `s3` extra: pip install "dex-agents[s3]"'
    ) from e

from ..session._media import ImageReference
from ._media import check_image, check_key, image_reference

_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class _S3Client(Protocol):
    """The part of a boto3 S3 client the store uses."""

    def put_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...


class S3MediaStore:
    """A `MediaStore` in an S3 bucket.

    boto3 is synchronous, so each call runs in a worker thread and never blocks
    the event loop that runs the session's activities.

    Args:
        bucket: The bucket; it must exist.
        prefix: Key prefix for the images, such as `sessions`; a `/` joins it
            to each image key.
        client: A boto3 S3 client to use (its credentials and region); by
            default one is made from the environment.
        endpoint_url: An S3-compatible endpoint (MinIO, a test server) for the
            default client.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: Any | None = None,
        endpoint_url: str | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            # boto3 ships no type information.
            client = boto3.client("s3", endpoint_url=endpoint_url)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        self._client = cast(_S3Client, client)

    def object_key(self, ref: ImageReference) -> str:
        """The S3 object key of `ref`."""
        key = check_key(ref)
        return f"{self.prefix}/{key}" if self.prefix else key

    async def put_image(self, data: bytes, media_type: str) -> ImageReference:
        """Store `data` and return its reference; see `MediaStore`."""
        ref = image_reference(data, media_type)
        await asyncio.to_thread(
            self._client.put_object,
            Bucket=self.bucket,
            Key=self.object_key(ref),
            Body=bytes(data),
            ContentType=media_type,
        )
        return ref

    async def get_image(self, ref: ImageReference) -> bytes:
        """The bytes of `ref`; see `MediaStore`."""
        key = self.object_key(ref)
        try:
            data = await asyncio.to_thread(self._read, key)
        except ClientError as e:
            # botocore is untyped: `response` is the parsed error response, a dict.
            response = cast(dict[str, Any], e.response)
            code = str(response.get("Error", {}).get("Code", ""))
            if code in _MISSING:
                raise KeyError(f"no image is stored under {ref.key!r}") from None
            raise
        return check_image(ref, data)

    def _read(self, key: str) -> bytes:
        response = self._client.get_object(Bucket=self.bucket, Key=key)
        body = response["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()

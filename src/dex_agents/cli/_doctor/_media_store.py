"""Each flow's media store (an S3 bucket answers `head_bucket`)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...stores import (
    DirectoryMediaStore,
    InMemoryMediaStore,
    MediaStore,
)
from ...stores._media import image_reference
from ...temporal import AgentSessionFlow
from .._errors import one_line
from ._check import Check, in_thread
from ._claude_cli import definition
from ._runtime_store import os_reason


async def check_media(flows: Sequence[AgentSessionFlow], timeout: float) -> Check:
    name, title = "media_store", "media store"
    if not flows:
        return Check(
            name=name,
            status="skip",
            text=f"{title}: not checked: it is part of an agent's definition; pass "
            "`--agent` to check it",
        )
    stores: list[tuple[AgentSessionFlow, MediaStore]] = []
    for flow in flows:
        store = getattr(definition(flow), "media_store", None)
        if store is not None:
            stores.append((flow, store))
    if not stores:
        types = ", ".join(flow.flow_type for flow in flows)
        return Check(
            name=name,
            status="pass",
            text=f"{title}: none configured (flow {types} takes no images)",
            details={"stores": []},
        )
    results = [await _probe_media(flow, store, timeout) for flow, store in stores]
    for status in ("fail", "warn"):
        for result in results:
            if result.status == status:
                return result
    return Check(
        name=name,
        status="pass",
        text="; ".join(result.text for result in results),
        details={"stores": [result.details for result in results]},
    )


async def _probe_media(
    flow: AgentSessionFlow, store: MediaStore, timeout: float
) -> Check:
    """Whether `store` answers, without storing anything in it."""
    name = "media_store"
    with contextlib.suppress(ImportError):
        from ...s3 import S3MediaStore

        if isinstance(store, S3MediaStore):
            return await _probe_s3(flow, store, timeout)
    if isinstance(store, InMemoryMediaStore):
        return Check(
            name=name,
            status="warn",
            text=f"media store of flow {flow.flow_type}: in memory: images that a "
            "client in another process uploads are not there",
            fix="use a `DirectoryMediaStore` or an `S3MediaStore` that every worker "
            "and client of the session share",
            details={"flow_type": flow.flow_type, "kind": "memory"},
        )
    if isinstance(store, DirectoryMediaStore):
        return await in_thread(lambda: _probe_directory(flow, store.path), timeout)
    # Any other store: a reference it cannot hold must be a KeyError, not a failure.
    kind = type(store).__name__
    title = f"media store of flow {flow.flow_type} ({kind})"
    details = {"flow_type": flow.flow_type, "kind": kind}
    never_stored = image_reference(
        f"dex-agents doctor {uuid.uuid4().hex}".encode(), "image/png"
    )
    try:
        async with asyncio.timeout(timeout):
            await store.get_image(never_stored)
    except KeyError:
        return Check(
            name=name, status="pass", text=f"{title}: answers", details=details
        )
    except TimeoutError:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: no answer within {timeout:g} s",
            fix="check that the service it uses runs and can be reached",
            details=details,
        )
    except Exception as err:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: {type(err).__name__}: {one_line(str(err))}",
            fix="check that the service it uses runs and can be reached",
            details=details,
        )
    return Check(name=name, status="pass", text=f"{title}: answers", details=details)


def _probe_directory(flow: AgentSessionFlow, path: Path) -> Check:
    """Whether a `DirectoryMediaStore`'s directory can be written (or created)."""
    name = "media_store"
    title = f"media store of flow {flow.flow_type}: directory {path}"
    details = {"flow_type": flow.flow_type, "kind": "directory", "path": str(path)}
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check(
            name=name,
            status="fail",
            text=f"{title}: {existing} is a file, not a directory",
            fix="give the `DirectoryMediaStore` a directory every worker can write",
            details=details,
        )
    try:
        with tempfile.NamedTemporaryFile(prefix=".dex-agents-doctor-", dir=existing):
            pass
    except OSError as err:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: cannot write {existing}: {os_reason(err)}",
            fix=f"fix the permissions of {existing}, or give the "
            "`DirectoryMediaStore` another directory",
            details=details,
        )
    return Check(name=name, status="pass", text=f"{title}: writable", details=details)


async def _probe_s3(flow: AgentSessionFlow, store: Any, timeout: float) -> Check:
    """`head_bucket` with the store's own client: its credentials, region, endpoint."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
    )

    name = "media_store"
    client: Any = store._client  # pyright: ignore[reportPrivateUsage]
    bucket = str(store.bucket)
    endpoint = str(client.meta.endpoint_url)
    title = f"media store of flow {flow.flow_type}: S3 bucket {bucket!r} at {endpoint}"
    details = {
        "flow_type": flow.flow_type,
        "kind": "s3",
        "bucket": bucket,
        "endpoint_url": endpoint,
    }

    def failed(text: str, fix: str) -> Check:
        return Check(
            name=name, status="fail", text=f"{title}: {text}", fix=fix, details=details
        )

    try:
        await in_thread(lambda: client.head_bucket(Bucket=bucket), timeout)
    except TimeoutError:
        return failed(
            f"no answer within {timeout:g} s",
            "check the endpoint (`endpoint_url`) and that the network reaches it",
        )
    except NoCredentialsError:
        return failed(
            "no AWS credentials",
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) where "
            "the worker runs, or give the `S3MediaStore` a client with credentials",
        )
    except EndpointConnectionError as err:
        return failed(
            f"cannot connect ({err})",
            "check the endpoint (`endpoint_url` of the `S3MediaStore`) and that the "
            "S3 service runs there",
        )
    except ClientError as err:
        code = str(err.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            return failed(
                "the bucket does not exist",
                f"create it (`aws s3 mb s3://{bucket}`), or name an existing one in "
                "the `S3MediaStore`",
            )
        if code in ("403", "AccessDenied", "Forbidden", "SignatureDoesNotMatch"):
            return failed(
                f"access denied ({code})",
                "check the AWS credentials where the worker runs, and give them "
                f"s3:ListBucket, s3:GetObject and s3:PutObject on {bucket}",
            )
        return failed(f"S3 answered {code}: {err}", "check the bucket and credentials")
    except BotoCoreError as err:
        return failed(
            f"{type(err).__name__}: {err}",
            "check the endpoint, the region and the AWS credentials",
        )
    return Check(name=name, status="pass", text=f"{title}: reachable", details=details)

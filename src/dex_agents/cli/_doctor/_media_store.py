"""Each flow's media store (an S3 bucket answers `head_bucket`)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ...stores import DirectoryMediaStore, MediaStore
from ...stores._media import InMemoryMediaStore, image_reference
from ...temporal._flow import AgentSessionFlow
from .._errors import one_line
from ._check import Check, Subject, in_thread
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
    with contextlib.suppress(ImportError):
        from ...s3 import S3MediaStore

        if isinstance(store, S3MediaStore):
            return await _probe_s3(flow, store, timeout)
    if isinstance(store, InMemoryMediaStore):
        return _subject(flow, "", kind="memory").outcome(
            "warn",
            "in memory: images that a client in another process uploads are not there",
            "use a `DirectoryMediaStore` or an `S3MediaStore` that every worker "
            "and client of the session share",
        )
    if isinstance(store, DirectoryMediaStore):
        return await in_thread(lambda: _probe_directory(flow, store.path), timeout)
    # Any other store: a reference it cannot hold must be a KeyError, not a failure.
    kind = type(store).__name__
    about = _subject(flow, f" ({kind})", kind=kind)
    unreachable = "check that the service it uses runs and can be reached"
    never_stored = image_reference(
        f"dex-agents doctor {uuid.uuid4().hex}".encode(), "image/png"
    )
    try:
        async with asyncio.timeout(timeout):
            await store.get_image(never_stored)
    except KeyError:
        return about.outcome("pass", "answers")
    except TimeoutError:
        return about.outcome("fail", f"no answer within {timeout:g} s", unreachable)
    except Exception as err:
        return about.outcome(
            "fail", f"{type(err).__name__}: {one_line(str(err))}", unreachable
        )
    return about.outcome("pass", "answers")


def _subject(flow: AgentSessionFlow, where: str, **details: str) -> Subject:
    """The media store of `flow` (`where` it is), for a line of the check."""
    return Subject(
        name="media_store",
        title=f"media store of flow {flow.flow_type}{where}",
        details={"flow_type": flow.flow_type, **details},
    )


def _probe_directory(flow: AgentSessionFlow, path: Path) -> Check:
    """Whether a `DirectoryMediaStore`'s directory can be written (or created)."""
    about = _subject(flow, f": directory {path}", kind="directory", path=str(path))
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return about.outcome(
            "fail",
            f"{existing} is a file, not a directory",
            "give the `DirectoryMediaStore` a directory every worker can write",
        )
    try:
        with tempfile.NamedTemporaryFile(prefix=".dex-agents-doctor-", dir=existing):
            pass
    except OSError as err:
        return about.outcome(
            "fail",
            f"cannot write {existing}: {os_reason(err)}",
            f"fix the permissions of {existing}, or give the "
            "`DirectoryMediaStore` another directory",
        )
    return about.outcome("pass", "writable")


async def _probe_s3(flow: AgentSessionFlow, store: Any, timeout: float) -> Check:
    """`head_bucket` with the store's own client: its credentials, region, endpoint."""
    # botocore ships no type information (and the project installs no stubs for it).
    from botocore.exceptions import (  # pyright: ignore[reportMissingTypeStubs]
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
    )

    client: Any = store._client  # pyright: ignore[reportPrivateUsage]
    bucket = str(store.bucket)
    endpoint = str(client.meta.endpoint_url)
    about = _subject(
        flow,
        f": S3 bucket {bucket!r} at {endpoint}",
        kind="s3",
        bucket=bucket,
        endpoint_url=endpoint,
    )

    def failed(text: str, fix: str) -> Check:
        return about.outcome("fail", text, fix)

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
        # botocore is untyped: `response` is the parsed error response, a dict.
        response = cast(dict[str, Any], err.response)
        code = str(response.get("Error", {}).get("Code", ""))
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
    return about.outcome("pass", "reachable")

"""The conformance suite every `MediaStore` implementation must pass.

Call `run_media_store_conformance` from an async test with a factory that
returns a fresh, empty store (or an awaitable of one). A broken rule raises
`AssertionError` naming the rule; the checks use explicit raises, so they still
run under `python -O`.

Example:
    ```python
    async def test_my_store(tmp_path: Path) -> None:
        await run_media_store_conformance(lambda: MyStore(tmp_path / str(uuid4())))
    ```
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
from collections.abc import Awaitable, Callable

from ..session._media import IMAGE_MEDIA_TYPES, ImageReference
from ..stores._media import MediaStore

# The smallest valid PNG: one transparent pixel.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
_BINARY = bytes(range(256)) * 9 + b"\x00\xff\r\n"

MediaStoreFactory = Callable[[], MediaStore | Awaitable[MediaStore]]


async def run_media_store_conformance(make_store: MediaStoreFactory) -> None:
    """Check every rule of the `MediaStore` contract on fresh stores."""
    for rule in (
        _round_trip,
        _content_addressed,
        _media_types,
        _refuses,
        _unknown_reference,
        _tampered_reference,
        _concurrent_puts,
    ):
        store = make_store()
        if inspect.isawaitable(store):
            store = await store
        try:
            await rule(store)
        except AssertionError as e:
            raise AssertionError(f"media store rule {rule.__name__[1:]!r}: {e}") from e


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


async def _round_trip(store: MediaStore) -> None:
    for data in (_PNG, _BINARY):
        ref = await store.put_image(data, "image/png")
        _check(ref.media_type == "image/png", f"media type kept, got {ref!r}")
        _check(ref.size == len(data), f"size is the byte count, got {ref!r}")
        _check(
            ref.sha256 == hashlib.sha256(data).hexdigest(),
            f"sha256 is the hex digest, got {ref!r}",
        )
        _check(await store.get_image(ref) == data, "get_image returns the bytes put")
        _check(
            ImageReference.from_wire(ref.to_wire()) == ref, "the wire form round-trips"
        )


async def _content_addressed(store: MediaStore) -> None:
    first = await store.put_image(_PNG, "image/png")
    second = await store.put_image(bytes(_PNG), "image/png")
    _check(first == second, f"equal bytes give equal references: {first} {second}")
    other = await store.put_image(_PNG + b"\x00", "image/png")
    _check(other.key != first.key, "different bytes get different keys")
    _check(await store.get_image(first) == _PNG, "a repeated put keeps the bytes")


async def _media_types(store: MediaStore) -> None:
    for media_type in sorted(IMAGE_MEDIA_TYPES):
        ref = await store.put_image(_BINARY, media_type)
        _check(ref.media_type == media_type, f"{media_type} kept, got {ref!r}")
        _check(await store.get_image(ref) == _BINARY, f"{media_type} round-trips")


async def _refuses(store: MediaStore) -> None:
    for data, media_type in ((b"", "image/png"), (_PNG, "application/pdf")):
        try:
            await store.put_image(data, media_type)
        except ValueError:
            continue
        raise AssertionError(
            f"put_image({len(data)} bytes, {media_type!r}) must raise ValueError"
        )


async def _unknown_reference(store: MediaStore) -> None:
    digest = hashlib.sha256(b"never stored").hexdigest()
    ref = ImageReference(
        media_type="image/png", key=f"{digest}.png", sha256=digest, size=12
    )
    await _expect_key_error(store, ref, "an unknown reference")
    escape = dataclasses.replace(ref, key="../../etc/passwd")
    await _expect_key_error(store, escape, "a key outside the store")


async def _tampered_reference(store: MediaStore) -> None:
    ref = await store.put_image(_PNG, "image/png")
    wrong = dataclasses.replace(ref, size=ref.size + 1)
    await _expect_key_error(store, wrong, "a reference whose size differs")


async def _concurrent_puts(store: MediaStore) -> None:
    refs = await asyncio.gather(
        *(store.put_image(_BINARY, "image/gif") for _ in range(8))
    )
    _check(len(set(refs)) == 1, f"concurrent puts agree: {set(refs)}")
    _check(await store.get_image(refs[0]) == _BINARY, "concurrent puts keep the bytes")


async def _expect_key_error(store: MediaStore, ref: ImageReference, what: str) -> None:
    try:
        await store.get_image(ref)
    except KeyError:
        return
    raise AssertionError(f"get_image of {what} must raise KeyError")

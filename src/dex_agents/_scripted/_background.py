"""`with` and `async with` for an object that starts and stops a background server."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class StartClose(ABC):
    """A sync and an async context manager over `start()` and `close()`.

    Entering starts and returns the object; leaving closes it. Both may block
    (waiting for a port, joining a thread), so the async forms run them off the
    event loop.
    """

    __slots__ = ()

    @abstractmethod
    def start(self) -> None:
        """Start serving."""

    @abstractmethod
    def close(self) -> None:
        """Stop serving; a no-op when not started."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)

"""Runtime stores (transcript segments, events, snapshots, blobs, turns) and media stores.

A new backend passes `dex_agents.testing.run_runtime_store_conformance` (or
`run_media_store_conformance` for a media store).
"""

from ._media import DirectoryMediaStore, MediaStore
from ._protocols import RuntimeStore
from ._sqlite import SQLiteRuntimeStore

__all__ = [
    "DirectoryMediaStore",
    "MediaStore",
    "RuntimeStore",
    "SQLiteRuntimeStore",
]

"""Runtime stores (transcript segments, events, snapshots, blobs, turns) and media stores."""

from ..session import ImageReference
from ._conformance import run_runtime_store_conformance
from ._media import DirectoryMediaStore, InMemoryMediaStore, MediaStore
from ._media_conformance import run_media_store_conformance
from ._memory import InMemoryRuntimeStore
from ._open import is_database_url, open_runtime_store, redacted_store
from ._protocols import BlobConflictError, RuntimeStore, SegmentConflictError
from ._sqlite import SQLiteRuntimeStore

__all__ = [
    "BlobConflictError",
    "DirectoryMediaStore",
    "ImageReference",
    "InMemoryMediaStore",
    "InMemoryRuntimeStore",
    "MediaStore",
    "RuntimeStore",
    "SQLiteRuntimeStore",
    "SegmentConflictError",
    "is_database_url",
    "open_runtime_store",
    "redacted_store",
    "run_media_store_conformance",
    "run_runtime_store_conformance",
]

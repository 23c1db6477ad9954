"""Runtime stores: transcript segments, the live event log and snapshot projections."""

from ._conformance import run_runtime_store_conformance
from ._memory import InMemoryRuntimeStore
from ._protocols import RuntimeStore, SegmentConflictError
from ._sqlite import SQLiteRuntimeStore

__all__ = [
    "InMemoryRuntimeStore",
    "RuntimeStore",
    "SQLiteRuntimeStore",
    "SegmentConflictError",
    "run_runtime_store_conformance",
]

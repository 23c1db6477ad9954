"""Public test kit: a scripted runner, a ledger, worker subprocesses, a scripted Messages API.

The conformance suites check a runtime store or a media store of your own.
`scripted_model()` runs the scripted Messages API for a program's own Claude
Code CLIs, so an agent runs offline with no API key (the README's examples).
"""

from .._scripted import MockMessagesApi, scripted_model
from ._ledger import Ledger
from ._media_store_conformance import run_media_store_conformance
from ._runtime_store_conformance import run_runtime_store_conformance
from ._scripted_runner import ScriptedRunner
from ._worker_process import WorkerProcess

__all__ = [
    "Ledger",
    "MockMessagesApi",
    "ScriptedRunner",
    "WorkerProcess",
    "run_media_store_conformance",
    "run_runtime_store_conformance",
    "scripted_model",
]

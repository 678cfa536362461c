"""The record: an append-only, hash-chained event log plus content-addressed blobs.

Every fact of a Run is an event here; replay, resume, queries and exports read
only from it. ``open_store`` opens a store directory; ``Store.events`` is the
log (the ``EventStore`` contract), ``Store.blobs`` the blob store. ``records.runs`` is the
Run read API: ``summarize`` folds what happened in a Run, ``better`` compares scores;
``records.experiments`` the experiment read API (``experiment_runs``: the Runs of its cells).

Names are re-exported lazily, so importing one small module of the package
(``records.store`` for its errors, say) does not import SQLAlchemy and zstd.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "EVENT_TYPES": "evopolicygym.records.events",
    "Envelope": "evopolicygym.records.events",
    "Event": "evopolicygym.records.events",
    "NewEvent": "evopolicygym.records.events",
    "decode_event": "evopolicygym.records.events",
    "new_event": "evopolicygym.records.events",
    "CellRun": "evopolicygym.records.experiments",
    "UnknownExperiment": "evopolicygym.records.experiments",
    "experiment_ids": "evopolicygym.records.experiments",
    "experiment_runs": "evopolicygym.records.experiments",
    "experiment_stream_id": "evopolicygym.records.experiments",
    "Store": "evopolicygym.records.location",
    "StoreUrl": "evopolicygym.records.location",
    "open_store": "evopolicygym.records.location",
    "resolve_store": "evopolicygym.records.location",
    "resolve_store_path": "evopolicygym.records.location",
    "store_exists": "evopolicygym.records.location",
    "RunSummary": "evopolicygym.records.runs",
    "SubmissionSummary": "evopolicygym.records.runs",
    "UnknownRun": "evopolicygym.records.runs",
    "better": "evopolicygym.records.runs",
    "program_of": "evopolicygym.records.runs",
    "resolve_run": "evopolicygym.records.runs",
    "run_id_of": "evopolicygym.records.runs",
    "run_stream_id": "evopolicygym.records.runs",
    "summarize": "evopolicygym.records.runs",
    "ANY_VERSION": "evopolicygym.records.store",
    "DuplicateEventError": "evopolicygym.records.store",
    "EventStore": "evopolicygym.records.store",
    "ExpectedVersionError": "evopolicygym.records.store",
    "StoreError": "evopolicygym.records.store",
    "StreamInfo": "evopolicygym.records.store",
    "verify_store": "evopolicygym.records.verify",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

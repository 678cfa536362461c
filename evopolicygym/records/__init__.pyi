# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.records.events import EVENT_TYPES as EVENT_TYPES
from evopolicygym.records.events import Envelope as Envelope
from evopolicygym.records.events import Event as Event
from evopolicygym.records.events import NewEvent as NewEvent
from evopolicygym.records.events import decode_event as decode_event
from evopolicygym.records.events import new_event as new_event
from evopolicygym.records.experiments import CellRun as CellRun
from evopolicygym.records.experiments import UnknownExperiment as UnknownExperiment
from evopolicygym.records.experiments import experiment_ids as experiment_ids
from evopolicygym.records.experiments import experiment_runs as experiment_runs
from evopolicygym.records.experiments import experiment_stream_id as experiment_stream_id
from evopolicygym.records.location import Store as Store
from evopolicygym.records.location import StoreUrl as StoreUrl
from evopolicygym.records.location import open_store as open_store
from evopolicygym.records.location import resolve_store as resolve_store
from evopolicygym.records.location import resolve_store_path as resolve_store_path
from evopolicygym.records.location import store_exists as store_exists
from evopolicygym.records.runs import RunSummary as RunSummary
from evopolicygym.records.runs import SubmissionSummary as SubmissionSummary
from evopolicygym.records.runs import UnknownRun as UnknownRun
from evopolicygym.records.runs import better as better
from evopolicygym.records.runs import program_of as program_of
from evopolicygym.records.runs import resolve_run as resolve_run
from evopolicygym.records.runs import run_id_of as run_id_of
from evopolicygym.records.runs import run_stream_id as run_stream_id
from evopolicygym.records.runs import summarize as summarize
from evopolicygym.records.store import ANY_VERSION as ANY_VERSION
from evopolicygym.records.store import DuplicateEventError as DuplicateEventError
from evopolicygym.records.store import EventStore as EventStore
from evopolicygym.records.store import ExpectedVersionError as ExpectedVersionError
from evopolicygym.records.store import StoreError as StoreError
from evopolicygym.records.store import StreamInfo as StreamInfo
from evopolicygym.records.verify import verify_store as verify_store

__all__ = [
    "ANY_VERSION",
    "EVENT_TYPES",
    "CellRun",
    "DuplicateEventError",
    "Envelope",
    "Event",
    "EventStore",
    "ExpectedVersionError",
    "NewEvent",
    "RunSummary",
    "Store",
    "StoreError",
    "StoreUrl",
    "StreamInfo",
    "SubmissionSummary",
    "UnknownExperiment",
    "UnknownRun",
    "better",
    "decode_event",
    "experiment_ids",
    "experiment_runs",
    "experiment_stream_id",
    "new_event",
    "open_store",
    "program_of",
    "resolve_run",
    "resolve_store",
    "resolve_store_path",
    "run_id_of",
    "run_stream_id",
    "store_exists",
    "summarize",
    "verify_store",
]

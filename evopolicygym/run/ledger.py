"""The Run's stream as its Host keeps it: the folded state, and every change as
decide → append → evolve.

Appends name the expected stream version and derive each event's id from the Run and
its stream version, so a retried append is a no-op. One RLock orders every change:
the drive loop, the Session's thread and the transcript flushes all apply through it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence

from evopolicygym.records.events import Event, RunCreated, new_event
from evopolicygym.records.location import Store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.run.decider import Command, Rejection, RunState, decide, fold

__all__ = [
    "HostFault",
    "Ledger",
    "OnChange",
    "RunError",
    "event_id",
    "load_run",
    "one_line",
    "storage_fault",
]

OnChange = Callable[[RunState, list[Event]], None]


class RunError(Exception):
    """A Run that cannot be created or carried on; the message says why."""


class HostFault(RunError):
    """The Host's own storage failed in a way that may pass (disk full, read-only media, an
    I/O error): the Run stops where it is, interrupted, charging nobody's budget, and a
    ``resume`` once the cause is fixed carries it on."""

    def __init__(self, run_id: str, what: str, fix: str) -> None:
        super().__init__(
            f"{what}: the Run is interrupted with its budget intact; "
            f"{fix} and `evopolicy resume {run_id}`"
        )
        self.what = what


class Stopping(RunError):
    """The Host is stopping on a signal: a failure met meanwhile (an evaluation whose workers
    the same signal killed) is the stop's, never recorded as the Run's failure."""

    def __init__(self) -> None:
        super().__init__("the Host is stopping; the Run is interrupted")


# (errno, what it means for the store, what the user does about it)
_STORAGE_ERRNOS = {
    errno.ENOSPC: ("store full", "free space"),
    errno.EDQUOT: ("store full (disk quota)", "free space"),
    errno.EROFS: ("store on read-only media", "make it writable"),
    errno.EIO: ("I/O error on the store's disk", "check the disk"),
}
_SQLITE_TEXTS = (
    ("disk is full", _STORAGE_ERRNOS[errno.ENOSPC]),
    ("readonly database", _STORAGE_ERRNOS[errno.EROFS]),
    ("disk i/o error", _STORAGE_ERRNOS[errno.EIO]),
)


def storage_fault(exc: BaseException) -> tuple[str, str] | None:
    """What ``exc`` (or an error it came from) says of the Host's storage, with its fix, where
    it is a fault that may pass; None for anything else."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _STORAGE_ERRNOS:
            return _STORAGE_ERRNOS[current.errno]
        if isinstance(current, sqlite3.Error) or type(current).__module__.startswith("sqlalchemy"):
            text = str(current).lower()
            for needle, meaning in _SQLITE_TEXTS:
                if needle in text:
                    return meaning
        current = current.__cause__ or current.__context__
    return None


def event_id(run_id: str, version: int) -> str:
    # The n-th event of a Run always has the same id: re-appending it after a lost
    # acknowledgement is recognised as the same event.
    return hashlib.sha256(f"evopolicygym:run-event:{run_id}:{version}".encode()).hexdigest()[:32]


def load_run(store: Store, run_id: str) -> tuple[RunState, list[Event]]:
    """Fold the Run's stream: its state and its typed events."""
    events = [envelope.event() for envelope in store.events.read_stream(run_stream_id(run_id))]
    if not events:
        raise RunError(f"no run {run_id!r} in the store at {store.location}")
    return fold(events), events


def one_line(exc: BaseException) -> str:
    """``exc`` as the one line an event records."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:2000]


class Ledger:
    """One Run's stream, folded: ``apply`` a command to record what it yields."""

    def __init__(self, store: Store, run_id: str, *, on_change: OnChange | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.stream = run_stream_id(run_id)
        self.lock = threading.RLock()
        self._on_change = on_change
        self._state = RunState()
        self._events: list[Event] = []
        # Set by whichever thread met a storage fault first; the drive loop and the
        # Agent's supervisor stop on it.
        self.fault: HostFault | None = None
        # Set when the Host is told to stop (a signal): failures met from then on are Stopping.
        self.stopping = False

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def events(self) -> Sequence[Event]:
        """The Run's events as folded so far (not a copy: read, never change)."""
        return self._events

    @property
    def created(self) -> RunCreated:
        first = self._events[0]
        assert isinstance(first, RunCreated)
        return first

    def load(self) -> RunState:
        """Fold the stream as the log has it now."""
        self._state, self._events = load_run(self.store, self.run_id)
        return self._state

    def apply(self, command: Command) -> list[Event] | Rejection:
        """Decide ``command``; append what it yields (a rejection's event too); evolve."""
        with self.lock:
            decision = decide(self._state, command)
            if isinstance(decision, Rejection):
                if decision.event is not None:
                    self._append([decision.event])
                return decision
            self._append(decision)
            return decision

    def must(self, command: Command) -> list[Event]:
        """``apply`` a Host command, which the rules refuse only when the Host is wrong."""
        decision = self.apply(command)
        if isinstance(decision, Rejection):
            raise RunError(f"internal: {type(command).__name__} refused: {decision.message}")
        return decision

    def host_fault(self, exc: BaseException) -> HostFault | None:
        """``exc`` as a HostFault (remembered in ``fault``) where it is the storage's, else None."""
        meaning = storage_fault(exc)
        if meaning is None:
            return None
        with self.lock:
            if self.fault is None:
                self.fault = HostFault(self.run_id, *meaning)
            return self.fault

    def _append(self, events: list[Event]) -> None:
        version = self._state.version
        batch = [
            new_event(event, event_id(self.run_id, version + i + 1))
            for i, event in enumerate(events)
        ]
        # Contention waits inside SQLite (its busy timeout); a version conflict means another
        # Host, which the run lock rules out, so it is an error, not something to retry.
        try:
            self.store.events.append(self.stream, batch, version)
        except Exception as exc:
            fault = self.host_fault(exc)
            if fault is not None:
                raise fault from exc
            raise
        state = fold(events, self._state)
        self._state = state
        self._events.extend(events)
        if self._on_change is not None:
            with contextlib.suppress(Exception):  # a view must never stop a Run
                self._on_change(state, events)

"""Running an experiment: create each cell's Run, carry it in a process of its own, record
how it ended; idempotent, so running it again after any crash finishes the same matrix.

Crash safety comes from the order of writes: a cell's ``CellRunAssigned`` (naming a new
Run id) is appended *before* that Run is created, and its ``CellRunEnded`` only after
the Run's own stream holds RunFinished. Killed anywhere, a re-run folds the same facts
(``decider.next_step``): an assigned Run with no stream is created then, one without
RunFinished is carried on from its log, one that ended is recorded. No Run is orphaned
(every Run is named by its cell first) and none is duplicated (a new Run is made only
for a cell whose last Run ended with a fault and that has retries left).

Two interfaces keep this package free of the Agent launcher and of where Runs execute:
``CellLauncher`` (given by the CLI) creates a cell's Run and names the command that
carries it; an ``Executor`` runs those commands (``LocalExecutor``: subprocesses on this
machine, at most ``max_runs`` at once; ``ray_executor.RayExecutor``: on a Ray cluster's nodes).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol

from evopolicygym.experiments.decider import Attempt, RunFacts, Step, is_retryable, next_step
from evopolicygym.records.events import (
    CellRunAssigned,
    CellRunEnded,
    ExperimentCell,
    ExperimentCreated,
    RunFinished,
    new_event,
)
from evopolicygym.records.experiments import ExperimentRecord, experiment_stream_id, fold_experiment
from evopolicygym.records.location import Store, StoreUrl, open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.records.store import ExpectedVersionError
from evopolicygym.run.liveness import exclusive

__all__ = [
    "CellLauncher",
    "CellProgress",
    "Executor",
    "ExperimentBusy",
    "ExperimentMismatch",
    "ExperimentOutcome",
    "ExperimentRunner",
    "LocalExecutor",
    "default_carry_argv",
    "ensure_experiment",
]

CellState = Literal["pending", "running", "done", "failed", "interrupted"]
STDERR_TAIL = 2000  # characters of a carry process's stderr kept to tell why it stopped


class ExperimentMismatch(ValueError):
    """The experiment exists in the store with another matrix."""


class ExperimentBusy(RuntimeError):
    """Another process is running this experiment on this store."""


class CellLauncher(Protocol):
    """What creates and carries a cell's Run (the CLI's: it knows the agents)."""

    def create(
        self, store: Store, experiment: ExperimentCreated, cell: ExperimentCell, run_id: str
    ) -> None:
        """Create the cell's Run with id ``run_id`` (``ValueError`` with why it cannot be)."""
        ...

    def carry_argv(self, store: Path | StoreUrl, run_id: str) -> list[str]:
        """The command line that carries the Run to its end (it resumes from the log);
        ``store`` as the runner opened it (a directory, or a PostgreSQL store's URL)."""
        ...


class Executor(Protocol):
    """Where carry commands run. ``start`` only while ``free()`` > 0; ``wait`` blocks until
    at least one ended and returns ``(key, exit status, stderr tail)`` of those that did."""

    def free(self) -> int: ...

    def running(self) -> int: ...

    def start(self, key: str, argv: list[str]) -> None: ...

    def wait(self) -> list[tuple[str, int, str]]: ...

    def signal(self, signum: int) -> None: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- local executor


def _die_with_parent(parent: int) -> Callable[[], None]:
    """A preexec function: the child is SIGKILLed when this process dies (as a Host's helpers
    are), so a killed experiment leaves no Run carried by nobody's child."""

    def preexec() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the prctl
            os._exit(1)

    return preexec


class LocalExecutor:
    """Carry commands as subprocesses of this one, each in its own process group (a
    terminal's Ctrl-C reaches only this process, which forwards it), at most ``max_runs``."""

    def __init__(self, max_runs: int, *, poll_interval: float = 0.05) -> None:
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        self.max_runs = max_runs
        self.poll_interval = poll_interval
        self._children: dict[str, tuple[subprocess.Popen[bytes], IO[bytes]]] = {}
        self._logs = tempfile.TemporaryDirectory(prefix="evopolicy-experiment-")

    def free(self) -> int:
        return self.max_runs - len(self._children)

    def running(self) -> int:
        return len(self._children)

    def start(self, key: str, argv: list[str]) -> None:
        if self.free() <= 0:
            raise RuntimeError("no free slot")
        log = open(Path(self._logs.name) / f"{uuid.uuid4().hex}.stderr", "w+b")  # noqa: SIM115
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )
        self._children[key] = (child, log)

    def wait(self) -> list[tuple[str, int, str]]:
        while self._children:
            ended = [
                (key, child, log)
                for key, (child, log) in self._children.items()
                if child.poll() is not None
            ]
            if ended:
                results = []
                for key, child, log in ended:
                    del self._children[key]
                    log.seek(0)
                    tail = log.read()[-STDERR_TAIL:].decode("utf-8", "replace")
                    log.close()
                    results.append((key, child.returncode, tail))
                return results
            time.sleep(self.poll_interval)
        return []

    def signal(self, signum: int) -> None:
        for child, _log in self._children.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)

    def close(self) -> None:
        self.signal(signal.SIGKILL)  # only where close comes before the children ended (an error)
        for child, log in self._children.values():
            with contextlib.suppress(Exception):
                child.wait(timeout=10)
            log.close()
        self._children.clear()
        self._logs.cleanup()


# --------------------------------------------------------------------------- the experiment


def ensure_experiment(store: Store, created: ExperimentCreated) -> ExperimentRecord:
    """The experiment's record, its stream started with ``created`` if new; the same name
    with another matrix is ``ExperimentMismatch``."""
    stream = experiment_stream_id(created.experiment_id)
    record = fold_experiment(store.events, created.experiment_id)
    if record.created is None:
        with contextlib.suppress(ExpectedVersionError):  # another process made it first: compare
            store.events.append(stream, [new_event(created, f"{stream}/created")], record.version)
        record = fold_experiment(store.events, created.experiment_id)
    assert record.created is not None
    if record.created.spec_digest != created.spec_digest:
        raise ExperimentMismatch(
            f"experiment {created.experiment_id!r} exists in this store with another matrix "
            f"({len(record.created.cells)} cell{'' if len(record.created.cells) == 1 else 's'}, "
            f"profile {record.created.profile}); "
            "give the changed spec another name"
        )
    return record


def _experiment_lock(store: Store, experiment_id: str) -> contextlib.AbstractContextManager[None]:
    """One runner per experiment, on every machine of the store."""
    return exclusive(
        store,
        store.path / "experiments" / f"{experiment_id}.lock",
        experiment_stream_id(experiment_id),
        lambda: ExperimentBusy(f"experiment {experiment_id} is being run by another process"),
    )


@dataclass
class CellProgress:
    """A cell as this invocation sees it."""

    cell: ExperimentCell
    state: CellState = "pending"
    run_id: str | None = None
    attempt: int = 0
    outcome: str | None = None
    detail: str = ""  # why a carry stopped short, or the Run could not be created


@dataclass
class ExperimentOutcome:
    experiment_id: str
    cells: list[CellProgress]
    interrupted: bool = False
    wall_s: float = 0.0
    bookkeeping_s: float = 0.0  # folding, deciding and appending the experiment's own events
    create_s: float = 0.0  # creating Runs (planning pools, storing programs), in this process
    runs_started: int = 0

    def count(self, state: CellState) -> int:
        return sum(1 for cell in self.cells if cell.state == state)

    @property
    def complete(self) -> bool:
        """Every cell ended with an outcome (not a fault, not interrupted)."""
        return all(cell.state == "done" for cell in self.cells)


def _event_id(stream: str, cell_id: str, what: str) -> str:
    """A deterministic event id (a retried append is recognised), within the 200 characters."""
    return f"{stream}/{hashlib.sha256(cell_id.encode()).hexdigest()[:20]}/{what}"[:200]


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def _run_facts(store: Store, run_id: str) -> RunFacts:
    stream = run_stream_id(run_id)
    info = next((i for i in store.events.streams(stream) if i.stream_id == stream), None)
    if info is None:
        return RunFacts(exists=False)
    last = next(iter(store.events.read_stream(stream, info.version - 1)), None)
    event = last.event() if last is not None else None
    return RunFacts(
        exists=True, terminal_reason=event.reason if isinstance(event, RunFinished) else None
    )


class ExperimentRunner:
    """Drive an experiment's cells to their ends (see the module docstring)."""

    def __init__(
        self,
        store_location: Path | StoreUrl,
        created: ExperimentCreated,
        launcher: CellLauncher,
        executor: Executor,
        *,
        retries: int = 1,
        on_change: Callable[[ExperimentOutcome], None] | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.store_location = store_location
        self.created = created
        self.launcher = launcher
        self.executor = executor
        self.retries = retries
        self.on_change = on_change or (lambda outcome: None)
        self.stopping = False
        self.outcome = ExperimentOutcome(
            created.experiment_id, [CellProgress(cell) for cell in created.cells]
        )

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Start no more Runs and pass ``signum`` on to the running ones (they record their
        interruption); ``run`` returns once they have ended."""
        self.stopping = True
        self.executor.signal(signum)

    def run(self) -> ExperimentOutcome:
        started = time.perf_counter()
        try:
            with (
                open_store(self.store_location, create=True) as store,
                _experiment_lock(store, self.created.experiment_id),
            ):
                self._drive(store)
        finally:
            self.executor.close()
            self.outcome.wall_s = time.perf_counter() - started
        self.outcome.interrupted = self.stopping
        return self.outcome

    # ---------------------------------------------------------------- the loop

    def _drive(self, store: Store) -> None:
        tick = time.perf_counter()
        record = ensure_experiment(store, self.created)
        progress = {p.cell.cell_id: p for p in self.outcome.cells}
        stream = experiment_stream_id(self.created.experiment_id)

        def append(event: CellRunAssigned | CellRunEnded, event_id: str) -> None:
            store.events.append(stream, [new_event(event, event_id)], record.version)
            record.fold(store.events.read_stream(stream, record.version))

        while True:
            for cell in self.created.cells:
                p = progress[cell.cell_id]
                if p.state != "pending":  # running, or settled for this invocation
                    continue
                step = self._next(store, record, cell, append, stream)
                p.attempt, p.run_id, p.outcome = step.attempt, step.run_id, step.outcome
                if step.kind in ("done", "failed"):
                    p.state = step.kind
                    continue
                if self.stopping or self.executor.free() <= 0:
                    continue
                tock = time.perf_counter()
                self.outcome.bookkeeping_s += tock - tick
                self._start(store, cell, step, append, stream)
                tick = time.perf_counter()
                self.outcome.create_s += tick - tock
            self.on_change(self.outcome)
            if self.executor.running() == 0:
                break
            self.outcome.bookkeeping_s += time.perf_counter() - tick
            ended = self.executor.wait()
            tick = time.perf_counter()
            for key, status, tail in ended:
                p = progress[key]
                assert p.run_id is not None
                facts = _run_facts(store, p.run_id)
                if facts.terminal_reason is None:
                    # Carried to no end (interrupted, or the carrying process failed): left
                    # as it is for the next invocation, which resumes it from its log.
                    p.state = "interrupted"
                    lines = [line for line in tail.splitlines() if line.strip()]
                    p.detail = (
                        lines[-1] if lines else f"the carrying process exited with status {status}"
                    )
                else:
                    p.state = "pending"  # recorded as ended on the next pass
        self.outcome.bookkeeping_s += time.perf_counter() - tick

    def _next(
        self,
        store: Store,
        record: ExperimentRecord,
        cell: ExperimentCell,
        append: Callable[[CellRunAssigned | CellRunEnded, str], None],
        stream: str,
    ) -> Step:
        """The cell's next step; a Run that ended but is not recorded as such is recorded first."""
        attempts = [
            Attempt(
                a.run_id,
                a.attempt,
                a.ended.outcome if a.ended else None,
                a.ended.retryable if a.ended else False,
            )
            for a in record.attempts.get(cell.cell_id, [])
        ]
        facts = (
            _run_facts(store, attempts[-1].run_id)
            if attempts and attempts[-1].outcome is None
            else None
        )
        step = next_step(attempts, facts, self.retries)
        if step.kind != "record_end":
            return step
        assert step.run_id is not None and step.outcome is not None
        retryable = is_retryable(step.outcome)
        ended = CellRunEnded(
            cell_id=cell.cell_id,
            run_id=step.run_id,
            attempt=step.attempt,
            outcome=step.outcome,
            retryable=retryable,
        )
        append(ended, _event_id(stream, cell.cell_id, f"ended/{step.run_id}"))
        return next_step(
            [*attempts[:-1], Attempt(step.run_id, step.attempt, step.outcome, retryable)],
            None,
            self.retries,
        )

    def _start(
        self,
        store: Store,
        cell: ExperimentCell,
        step: Step,
        append: Callable[[CellRunAssigned | CellRunEnded, str], None],
        stream: str,
    ) -> None:
        p = next(p for p in self.outcome.cells if p.cell is cell)
        run_id = step.run_id
        if step.kind == "assign":
            run_id = _new_run_id()
            # Named by its cell before it exists: a crash after this leaves a cell whose
            # Run is created on the next invocation, never a Run that no cell names.
            append(
                CellRunAssigned(cell_id=cell.cell_id, run_id=run_id, attempt=step.attempt),
                _event_id(stream, cell.cell_id, f"assigned/{step.attempt}"),
            )
        assert run_id is not None
        p.run_id, p.attempt = run_id, step.attempt
        if step.kind in ("assign", "create"):
            try:
                self.launcher.create(store, self.created, cell, run_id)
            except ValueError as exc:
                message = " ".join(str(exc).split())
                append(
                    CellRunEnded(
                        cell_id=cell.cell_id,
                        run_id=run_id,
                        attempt=step.attempt,
                        outcome="create_failed",
                        retryable=False,
                        error=message[:2000],
                    ),
                    _event_id(stream, cell.cell_id, f"ended/{run_id}"),
                )
                p.state, p.outcome, p.detail = "failed", "create_failed", message
                return
        if self.stopping:  # a signal came while the Run was created: the next invocation carries it
            return
        self.executor.start(cell.cell_id, self.launcher.carry_argv(self.store_location, run_id))
        p.state = "running"
        self.outcome.runs_started += 1


def default_carry_argv(
    store: Path | StoreUrl, run_id: str, *, allow_uncontained: bool
) -> list[str]:
    """``evopolicy resume RUN`` with this interpreter: what carries a created Run to its end.
    A PostgreSQL store is not named on the command line (its URL may hold a password, which
    any user could read there): the caller passes it in the environment (``STORE_ENV``)."""
    where = [] if isinstance(store, StoreUrl) else ["--store", str(store)]
    argv = [sys.executable, "-m", "evopolicygym.cli", "resume", run_id, *where, "--json"]
    return [*argv, "--allow-uncontained-agent"] if allow_uncontained else argv

"""The experiment read API: which Runs stand for the cells of an experiment's matrix.

An experiment has one stream, ``experiment-<id>`` (``experiment_stream_id``): its
``ExperimentCreated`` (the resolved matrix), then per cell each Run assigned to it
(``CellRunAssigned``, one per attempt) and how that Run ended (``CellRunEnded``).
``fold_experiment`` folds it into an ``ExperimentRecord``; ``experiment_runs`` lists
every Run of every cell as a ``CellRun``; ``experiment_ids`` lists the experiments.
The Runs' own streams are ordinary Run streams: everything that reads Runs reads them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evopolicygym.records.events import (
    CellRunAssigned,
    CellRunEnded,
    Envelope,
    ExperimentCell,
    ExperimentCreated,
)
from evopolicygym.records.store import EventStore

__all__ = [
    "EXPERIMENT_PREFIX",
    "CellRun",
    "ExperimentRecord",
    "UnknownExperiment",
    "cell_config",
    "experiment_id_of",
    "experiment_ids",
    "experiment_runs",
    "experiment_stream_id",
    "fold_experiment",
    "read_experiment",
]

EXPERIMENT_PREFIX = "experiment-"


class UnknownExperiment(LookupError):
    """No experiment of that id in the store."""


def experiment_stream_id(experiment_id: str) -> str:
    """The stream of the experiment ``experiment_id``."""
    return EXPERIMENT_PREFIX + experiment_id


def experiment_id_of(stream_id: str) -> str | None:
    """The experiment id of an experiment stream, None for any other stream."""
    return stream_id[len(EXPERIMENT_PREFIX) :] if stream_id.startswith(EXPERIMENT_PREFIX) else None


@dataclass(frozen=True)
class CellRun:
    """One Run assigned to one cell of an experiment."""

    experiment_id: str
    cell_id: str  # stable and readable: "<agent>/<benchmark>/seed=<s>/agent_seed=<a>"
    agent: str  # the spec's agent label
    benchmark: str  # the spec's benchmark label (its id unless the spec names it)
    benchmark_id: str  # the registry id (its parameters in benchmark_params)
    seed: int  # the Run seed
    agent_seed: int
    run_id: str
    attempt: int  # 1-based; >1 means the cell was retried
    current: bool  # the attempt that stands for the cell (its latest)
    outcome: str | None  # None while running; else the Run's terminal reason when it ended
    benchmark_params: dict[str, Any] = field(default_factory=dict)
    provider: str = ""
    retryable: bool = False  # the outcome was a fault (a retry may be made)
    error: str | None = None


@dataclass
class Assignment:
    """One attempt of a cell: its Run and, once recorded, how it ended."""

    run_id: str
    attempt: int
    ended: CellRunEnded | None = None


@dataclass
class ExperimentRecord:
    """An experiment folded from its stream: the matrix and each cell's attempts in order."""

    experiment_id: str
    created: ExperimentCreated | None = None
    attempts: dict[str, list[Assignment]] = field(default_factory=dict)
    version: int = 0  # the stream version folded up to (for an expected-version append)

    def apply(self, event: object) -> None:
        if isinstance(event, ExperimentCreated):
            self.created = event
            self.attempts = {cell.cell_id: [] for cell in event.cells}
        elif isinstance(event, CellRunAssigned):
            self.attempts.setdefault(event.cell_id, []).append(
                Assignment(event.run_id, event.attempt)
            )
        elif isinstance(event, CellRunEnded):
            for assignment in self.attempts.get(event.cell_id, []):
                if assignment.run_id == event.run_id:
                    assignment.ended = event

    def fold(self, envelopes: Iterable[Envelope]) -> ExperimentRecord:
        for envelope in envelopes:
            self.apply(envelope.event())
            self.version = envelope.stream_version
        return self

    @property
    def cells(self) -> list[ExperimentCell]:
        return list(self.created.cells) if self.created is not None else []

    def current(self, cell_id: str) -> Assignment | None:
        """The cell's latest attempt, None before any Run was assigned to it."""
        attempts = self.attempts.get(cell_id) or []
        return attempts[-1] if attempts else None

    def runs(self) -> list[CellRun]:
        """Every Run of every cell, in matrix order then attempt order."""
        created = self.created
        if created is None:
            return []
        agents = {agent.name: agent for agent in created.agents}
        benchmarks = {benchmark.name: benchmark for benchmark in created.benchmarks}
        rows: list[CellRun] = []
        for cell in created.cells:
            attempts = self.attempts.get(cell.cell_id, [])
            benchmark = benchmarks[cell.benchmark]
            for i, assignment in enumerate(attempts):
                ended = assignment.ended
                rows.append(
                    CellRun(
                        experiment_id=self.experiment_id,
                        cell_id=cell.cell_id,
                        agent=cell.agent,
                        benchmark=cell.benchmark,
                        benchmark_id=benchmark.id,
                        seed=cell.seed,
                        agent_seed=cell.agent_seed,
                        run_id=assignment.run_id,
                        attempt=assignment.attempt,
                        current=i == len(attempts) - 1,
                        outcome=ended.outcome if ended is not None else None,
                        benchmark_params=dict(benchmark.params),
                        provider=agents[cell.agent].provider if cell.agent in agents else "",
                        retryable=ended.retryable if ended is not None else False,
                        error=ended.error if ended is not None else None,
                    )
                )
        return rows


def read_experiment(events: EventStore, experiment_id: str) -> ExperimentRecord:
    """The experiment folded from its stream; ``UnknownExperiment`` if it has none."""
    # Given as <id> or as its stream id experiment-<id>: the name as given first (an
    # experiment may itself be named experiment-...).
    for candidate in (experiment_id, experiment_id_of(experiment_id)):
        if candidate:
            record = fold_experiment(events, candidate)
            if record.created is not None:
                return record
    raise UnknownExperiment(f"no experiment {experiment_id!r} in this store")


def fold_experiment(events: EventStore, experiment_id: str) -> ExperimentRecord:
    """The experiment folded from its stream (``created`` is None where there is none)."""
    return ExperimentRecord(experiment_id).fold(
        events.read_stream(experiment_stream_id(experiment_id), 0)
    )


def experiment_runs(events: EventStore, experiment_id: str) -> list[CellRun]:
    """Every Run of the experiment's cells (retries included; ``current`` marks the one that
    stands for its cell), in matrix order. ``UnknownExperiment`` if there is no such experiment."""
    return read_experiment(events, experiment_id).runs()


def experiment_ids(events: EventStore) -> list[str]:
    """The ids of every experiment in the store, sorted."""
    return sorted(
        experiment_id
        for info in events.streams(EXPERIMENT_PREFIX)
        if (experiment_id := experiment_id_of(info.stream_id))
    )


def cell_config(created: ExperimentCreated, cell: ExperimentCell) -> dict[str, Any]:
    """The RunConfig (as a dict) of the cell's Run: the shared config with its seed and
    its Benchmark's parameters."""
    params = next((b.params for b in created.benchmarks if b.name == cell.benchmark), {})
    return {**created.config, "seed": cell.seed, "benchmark_params": dict(params)}

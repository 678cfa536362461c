"""The store's experiments, and one experiment: its leaderboard, per-Benchmark tables, the Runs
of its cells and its figures.

``/experiments`` lists every experiment stream (``records.experiments``): its profile, agents,
Benchmarks, cells and how their current Runs stand. ``/experiments/{id}`` shows the rank
scores as ``evopolicy experiment summary`` computes them: the same ``runs_df`` and
``submissions_df`` over the experiment, the same ``analysis.diagnostics.study`` (the ranking is
written there once), and the report's figures of an experiment (``report.figures``).

A page is computed from the experiment's stream and its Runs' streams; what it computed is
kept (``PageMemo``) under their versions, so a page open while other Runs are recorded is
computed again only when its own experiment moved. Recorded strings pass the viewer's
redactor; the templates escape them.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.experiments import (
    EXPERIMENT_PREFIX,
    CellRun,
    ExperimentRecord,
    UnknownExperiment,
    experiment_id_of,
    experiment_stream_id,
    fold_experiment,
    read_experiment,
)
from evopolicygym.records.store import EventStore
from evopolicygym.report.html import plain
from evopolicygym.view.app import Viewer, render, viewer_of

if TYPE_CHECKING:  # pandas is loaded where a page needs it, not on import
    import pandas as pd

__all__ = ["ROUTES", "PageMemo", "redact_spec"]

KEEP = 16  # experiments (or pairs of Runs) whose computed page is kept
LISTED = 10_000  # experiments whose row of the list is kept (a row is small)


class PageMemo:
    """What a page computed, one value per key (an experiment, a pair of Runs) with the
    version it was computed at (stream versions): a newer version replaces it. Shared by the
    server's threads; past ``keep`` keys, the least recently used is dropped."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._found: OrderedDict[Hashable, tuple[Hashable, Any]] = OrderedDict()

    @classmethod
    def of(cls, viewer: Viewer, name: str, keep: int = KEEP) -> PageMemo:
        """The viewer's memo called ``name`` (made on first use)."""
        memo = viewer.extra.get(name)
        if not isinstance(memo, PageMemo):
            memo = viewer.extra.setdefault(name, cls(keep))
        return memo

    def get(self, key: Hashable, version: Hashable | None, compute: Callable[[], Any]) -> Any:
        """The value of ``key`` at ``version``, else ``compute()``, kept in its place unless
        ``version`` is None (not known: computed every time)."""
        if version is not None:
            with self._lock:
                found = self._found.get(key)
                if found is not None and found[0] == version:
                    self._found.move_to_end(key)
                    return found[1]
        value = compute()
        if version is not None:
            with self._lock:
                self._found[key] = (version, value)
                self._found.move_to_end(key)
                while len(self._found) > self.keep:
                    self._found.popitem(last=False)
        return value


def redact_spec(value: Any, redact: Callable[[str], str]) -> Any:
    """A figure spec with ``redact`` applied to every string in it (labels from the record)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_spec(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_spec(v, redact) for v in value]
    return value


def _created_at(events: EventStore, experiment_id: str) -> int | None:
    """When the experiment was recorded: its stream's first event."""
    stream = events.read_stream(experiment_stream_id(experiment_id), 0)
    try:
        first = next(iter(stream), None)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    return None if first is None else first.recorded_at


# --------------------------------------------------------------------------- the list


@dataclass(frozen=True)
class ExperimentRow:
    """One experiment as the list shows it (strings redacted)."""

    experiment_id: str  # as recorded: the link
    shown_id: str
    profile: str
    spec_digest: str
    agents: list[str]
    benchmarks: list[str]
    cells: int
    runs: int  # every attempt
    ended: int  # cells whose current Run ended
    running: int  # cells whose current Run has not ended
    waiting: int  # cells with no Run yet
    faults: int  # cells whose current Run ended in a fault (a retry may follow)
    created_at: int | None


@dataclass(frozen=True)
class CellCounts:
    ended: int
    running: int
    waiting: int
    faults: int


def cell_counts(record: ExperimentRecord) -> CellCounts:
    """How the cells' current Runs stand, as the experiment stream tells."""
    current = [record.current(cell.cell_id) for cell in record.cells]
    ended = [a for a in current if a is not None and a.ended is not None]
    return CellCounts(
        ended=len(ended),
        running=sum(1 for a in current if a is not None and a.ended is None),
        waiting=sum(1 for a in current if a is None),
        faults=sum(1 for a in ended if a.ended is not None and a.ended.retryable),
    )


def _list_row(
    events: EventStore, experiment_id: str, redact: Callable[[str], str]
) -> ExperimentRow | None:
    record = fold_experiment(events, experiment_id)
    created = record.created
    if created is None:
        return None
    counts = cell_counts(record)
    return ExperimentRow(
        experiment_id=experiment_id,
        shown_id=redact(experiment_id),
        profile=redact(created.profile),
        spec_digest=created.spec_digest,
        agents=[redact(a.name) for a in created.agents],
        benchmarks=[
            redact(b.name if b.name == b.id else f"{b.name} ({b.id})") for b in created.benchmarks
        ],
        cells=len(record.cells),
        runs=sum(len(attempts) for attempts in record.attempts.values()),
        ended=counts.ended,
        running=counts.running,
        waiting=counts.waiting,
        faults=counts.faults,
        created_at=_created_at(events, experiment_id),
    )


def experiment_rows(viewer: Viewer) -> list[ExperimentRow]:
    """Every experiment of the store, the most recently created first."""
    events = viewer.store.events
    memo = PageMemo.of(viewer, "experiments.list", keep=LISTED)
    rows: list[ExperimentRow] = []
    for info in events.streams(EXPERIMENT_PREFIX):
        experiment_id = experiment_id_of(info.stream_id)
        if not experiment_id:
            continue
        row: ExperimentRow | None = memo.get(
            experiment_id,
            info.version,
            functools.partial(_list_row, events, experiment_id, viewer.redact),
        )
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: (-(r.created_at or 0), r.experiment_id))
    return rows


async def experiments(request: Request) -> Response:
    viewer = viewer_of(request)
    rows = await run_in_threadpool(experiment_rows, viewer)
    return render(request, "experiments.html", rows=rows)


# --------------------------------------------------------------------------- one experiment


@dataclass(frozen=True)
class Study:
    """What ``experiment summary`` computes for an experiment, and its figures."""

    runs: pd.DataFrame
    found: dict[str, Any]  # diagnostics.study
    figures: list[tuple[str, dict[str, Any]]]
    problem: str | None = None  # why the Submissions' figures are missing


def study_of(viewer: Viewer, experiment_id: str) -> Study:
    """The diagnostics and figures of ``experiment_id`` over each cell's current Run, as
    ``evopolicy experiment summary`` reads them (the ranking is the analysis package's)."""
    from evopolicygym.analysis import diagnostics, runs_df, submissions_df
    from evopolicygym.report.figures import experiment_figures

    runs = runs_df(viewer.store, experiment=experiment_id)
    problem = None
    try:
        submissions = submissions_df(viewer.store, experiment=experiment_id)
    except BlobError as exc:  # a program blob missing or corrupt: rank without the edits
        submissions = submissions_df(viewer.store, run_ids=[])
        problem = f"a program cannot be read ({exc}); `evopolicy record verify` checks the store"
    figures = [
        (name, redact_spec(spec, viewer.redact))
        for name, spec in experiment_figures(runs, submissions)
    ]
    return Study(runs, diagnostics.study(runs, submissions), figures, problem)


def _success_rates(runs: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (agent, Benchmark): successful Runs and Runs, of each cell's current one."""
    from evopolicygym.analysis import diagnostics

    found: dict[tuple[str, str], tuple[int, int]] = {}
    current = diagnostics.current_runs(runs)
    for (agent, benchmark), group in current.groupby(diagnostics.GROUP, sort=True, dropna=False):
        wins = sum(1 for v in group["success"] if plain(v) is True)
        found[(str(agent), str(benchmark))] = (wins, len(group))
    return found


def _leaderboard(found: dict[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """The leaderboard as the CLI prints it: per agent its rank score, then per Benchmark its
    rank and scores (mean, SD, 95% interval, scored of Runs)."""
    scores = {(r["agent"], r["benchmark"]): r for r in found["scores"]}
    benchmarks = sorted({b for _, b in scores})
    rows = [
        {
            "agent": redact(str(row["agent"])),
            "rank_score": row["rank_score"],
            "benchmarks": row["benchmarks"],
            "cells": [
                {"rank": row["ranks"].get(b), "score": scores.get((row["agent"], b))}
                for b in benchmarks
            ],
        }
        for row in found["leaderboard"]
    ]
    return {"benchmarks": [redact(str(b)) for b in benchmarks], "rows": rows}


def _benchmark_tables(
    found: dict[str, Any], runs: pd.DataFrame, redact: Callable[[str], str]
) -> list[dict[str, Any]]:
    """Per Benchmark, one row per agent: its rank, scores, success rate and budget share (an
    agent ranked there without a recorded Run too: it ranks last)."""
    scores = {(r["agent"], r["benchmark"]): r for r in found["scores"]}
    budget = {(r["agent"], r["benchmark"]): r for r in found["budget_use"]}
    success = _success_rates(runs)
    tables: dict[str, list[dict[str, Any]]] = {}
    for entry in found["leaderboard"]:
        agent = entry["agent"]
        for benchmark, rank in entry["ranks"].items():
            row = scores.get((agent, benchmark)) or {}
            wins, of = success.get((str(agent), str(benchmark)), (0, 0))
            tables.setdefault(benchmark, []).append(
                {
                    "agent": redact(str(agent)),
                    "rank": rank,
                    "runs": row.get("runs", 0),
                    "scored": row.get("scored", 0),
                    **{k: row.get(k) for k in ("mean", "sd", "ci_low", "ci_high")},
                    "successes": wins,
                    "success_rate": wins / of if of else None,
                    "budget_share": (budget.get((agent, benchmark)) or {}).get("budget_share"),
                }
            )
    directions = {r["benchmark"]: r["score_direction"] for r in found["scores"]}
    return [
        {
            "benchmark": redact(str(b)),
            "direction": directions.get(b, "-"),
            "rows": sorted(tables[b], key=lambda r: (r["rank"], r["agent"])),
        }
        for b in sorted(tables)
    ]


# What the cells' table shows of each Run, from ``runs_df``.
RUN_FACTS = (
    "status",
    "validation_score",
    "assessment_score",
    "best_score",
    "budget_used",
    "budget_total",
    "success",
)


def _run_facts(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {
        str(r["run_id"]): {k: plain(r[k]) for k in RUN_FACTS}
        for r in runs[["run_id", *RUN_FACTS]].to_dict("records")
    }


def _cells(
    viewer: Viewer, record: ExperimentRecord, cell_runs: Iterable[CellRun], runs: pd.DataFrame
) -> list[dict[str, Any]]:
    """Each cell of the matrix with its Runs, in attempt order (none: waiting)."""
    redact = viewer.redact
    facts = _run_facts(runs)
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for run in cell_runs:
        indexed = viewer.index.get(run.run_id)
        known = facts.get(run.run_id)
        status = indexed.status if indexed is not None else (known or {}).get("status")
        by_cell.setdefault(run.cell_id, []).append(
            {
                "run_id": run.run_id,
                "shown_id": redact(run.run_id),
                "recorded": known is not None,
                "attempt": run.attempt,
                "current": run.current,
                "outcome": redact(run.outcome) if run.outcome is not None else None,
                "error": redact(run.error) if run.error else None,
                "status": redact(status) if status else None,
                **{k: (known or {}).get(k) for k in RUN_FACTS if k != "status"},
            }
        )
    return [
        {
            "cell_id": redact(cell.cell_id),
            "agent": redact(cell.agent),
            "benchmark": redact(cell.benchmark),
            "seed": cell.seed,
            "agent_seed": cell.agent_seed,
            "runs": by_cell.get(cell.cell_id, []),
        }
        for cell in record.cells
    ]


def experiment_view(viewer: Viewer, experiment_id: str) -> dict[str, Any]:
    """The context of an experiment's page; ``UnknownExperiment`` if there is none."""
    events = viewer.store.events
    record = read_experiment(events, experiment_id)
    created = record.created
    assert created is not None  # read_experiment found its ExperimentCreated
    cell_runs = record.runs()
    versions = []
    for run in cell_runs:
        row = viewer.index.get(run.run_id)
        versions.append(None if row is None else row.version)
    study = PageMemo.of(viewer, "experiments.study").get(
        record.experiment_id,
        (record.version, tuple(versions)),  # a Run not indexed yet: None, until it is
        lambda: study_of(viewer, record.experiment_id),
    )
    redact = viewer.redact
    return {
        "experiment_id": redact(record.experiment_id),
        "profile": redact(created.profile),
        "spec_digest": created.spec_digest,
        "created_at": _created_at(events, record.experiment_id),
        "agents": [
            {"name": redact(a.name), "provider": redact(a.provider)} for a in created.agents
        ],
        "benchmarks": [
            {
                "name": redact(b.name),
                "id": redact(b.id),
                "params": redact(json.dumps(b.params, sort_keys=True, default=str)),
            }
            for b in created.benchmarks
        ],
        "counts": cell_counts(record),
        "cell_total": len(record.cells),
        "attempts": len(cell_runs),
        "counted": study.found["runs"],
        "leaderboard": _leaderboard(study.found, redact),
        "tables": _benchmark_tables(study.found, study.runs, redact),
        "cells": _cells(viewer, record, cell_runs, study.runs),
        "figures": study.figures,
        "problem": redact(study.problem) if study.problem else None,
    }


async def experiment(request: Request) -> Response:
    viewer = viewer_of(request)
    experiment_id = request.path_params["experiment_id"]
    await run_in_threadpool(viewer.index.refresh)
    try:
        context = await run_in_threadpool(experiment_view, viewer, experiment_id)
    except UnknownExperiment:
        raise HTTPException(
            404, f"no experiment {viewer.redact(experiment_id)!r} in this store"
        ) from None
    return render(request, "experiment.html", needs_plots=True, **context)


ROUTES: list[BaseRoute] = [
    Route("/experiments", experiments, name="experiments"),
    Route("/experiments/{experiment_id:path}", experiment, name="experiment"),
]

"""Building a report: read what it tells of, render its sections, wrap them in one page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from evopolicygym.records.location import Store
from evopolicygym.report.html import page
from evopolicygym.report.plots import plotly_js
from evopolicygym.report.run_data import lineage_of, read_run
from evopolicygym.report.run_page import run_sections

__all__ = ["Report", "experiment_report", "run_report", "runs_report"]


@dataclass(frozen=True)
class Report:
    html: str
    runs: int  # how many Runs the page tells of


def run_report(
    store: Store, stream_id: str, *, redact: Callable[[str], str], status: str | None = None
) -> Report:
    """The page of the Run of ``stream_id`` (``records.runs.resolve_run`` finds it)."""
    data = read_run(store, stream_id)
    data.lineage = lineage_of(store, data.summary.run_id)
    s = data.summary
    title = f"Run {s.run_id}"
    agent = s.agent.name if s.agent is not None else "?"
    subtitle = f"{s.benchmark_id or '?'} · agent {agent} · {status or s.status}"
    return Report(page(title, subtitle, run_sections(data, store, redact, status), plotly_js()), 1)


def _many(runs: pd.DataFrame, submissions: pd.DataFrame, title: str, label: str) -> Report:
    from evopolicygym.report.experiment_page import experiment_sections

    n = len(runs)
    subtitle = f"{n} Run" + ("" if n == 1 else "s")
    return Report(
        page(title, subtitle, experiment_sections(runs, submissions, label), plotly_js()), n
    )


def experiment_report(store: Store, experiment_id: str) -> Report:
    """The page of the experiment ``experiment_id`` (every attempt of every cell; the
    figures count each cell's current Run). ``UnknownExperiment`` if there is none.
    It shows no recorded text, so it needs no redactor."""
    from evopolicygym.analysis import runs_df, submissions_df
    from evopolicygym.records.experiments import read_experiment

    record = read_experiment(store.events, experiment_id)  # UnknownExperiment before any work
    experiment_id = record.experiment_id
    runs = runs_df(store, experiment=experiment_id)
    submissions = submissions_df(store, experiment=experiment_id)
    return _many(runs, submissions, f"Experiment {experiment_id}", f"experiment {experiment_id}")


def runs_report(
    store: Store, run_ids: Sequence[str] | None = None, *, title: str = "Runs"
) -> Report:
    """The experiment page over any Runs of the store (all of them by default): agents by
    name, Benchmarks by id."""
    from evopolicygym.analysis import runs_df, submissions_df

    runs = runs_df(store, run_ids=run_ids)
    submissions = submissions_df(store, run_ids=run_ids)
    return _many(
        runs,
        submissions,
        title,
        "Runs of the store" if run_ids is None else f"{len(runs)} Runs named",
    )

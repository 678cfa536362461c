"""What every recorded experiment must hold, however its Runs ended or were interrupted."""

from __future__ import annotations

import subprocess
from pathlib import Path

from evopolicygym.experiments.decider import OUTCOMES
from evopolicygym.records.events import RunFinished
from evopolicygym.records.experiments import experiment_runs, read_experiment
from evopolicygym.records.location import open_store
from evopolicygym.records.runs import run_id_of, summarize
from tests.support.cli import CLI

TIMEOUT = 600


def check_consistent(store: Path, experiment_id: str) -> None:
    """Every cell: one current Run that finished with an outcome; no Run outside the experiment;
    budgets equal Episodes; the stream's ends agree with the Runs' RunFinished."""
    with open_store(store) as opened:
        events = opened.events
        record = read_experiment(events, experiment_id)
        runs = experiment_runs(events, experiment_id)
        current = [r for r in runs if r.current]
        assert sorted(r.cell_id for r in current) == sorted(c.cell_id for c in record.cells)
        named = {r.run_id for r in runs}
        streams = {run_id_of(info.stream_id) for info in events.streams("run-")}
        assert streams == named, (
            f"Runs no cell names: {streams - named}; cells' Runs never made: {named - streams}"
        )
        for cell_id, attempts in record.attempts.items():
            assert [a.attempt for a in attempts] == list(range(1, len(attempts) + 1)), cell_id
            assert all(a.ended is not None for a in attempts), cell_id
            assert all(a.ended is not None and a.ended.retryable for a in attempts[:-1]), cell_id
        for cell_run in runs:
            summary = summarize(events, f"run-{cell_run.run_id}")
            last = list(events.read_stream(f"run-{cell_run.run_id}", 0))[-1].event()
            assert isinstance(last, RunFinished) and last.reason == cell_run.outcome
            episodes = sum(len(s.indices) for s in summary.submissions.values())
            assert summary.budget_used == episodes, cell_run.run_id
        assert all(r.outcome in OUTCOMES for r in current)
    verify = subprocess.run(
        [*CLI, "record", "verify", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr

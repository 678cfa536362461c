"""The page of an experiment (or any set of Runs): the leaderboard with rank score and
intervals, best-so-far curves per agent and Benchmark, selection validity, edit dynamics,
budget use, and one row per Run.

Built on the analysis dataframes and diagnostics (``runs_df``, ``submissions_df``,
``analysis.diagnostics``), so its figures are the ones ``experiment summary`` prints. It
holds no transcript and no program: a thousand Runs stay a page of a few megabytes.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evopolicygym.analysis import diagnostics
from evopolicygym.report.figures import (
    agent_colors,
    benchmark_best_figures,
    edits_figure,
    leaderboard_figure,
    selection_figure,
)
from evopolicygym.report.html import Markup, Section, esc, table
from evopolicygym.report.plots import spec_markup

__all__ = ["experiment_sections"]


def _value(value: Any) -> Any:
    """A frame's cell as a plain value: NA and NaN as None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _frame_table(frame: pd.DataFrame, columns: list[str], headers: list[str] | None = None) -> str:
    rows = [[_value(row[c]) for c in columns] for row in frame.to_dict("records")]
    return table(headers or columns, rows)


def _plot(div_id: str, spec: dict[str, Any] | None, nothing: str) -> str:
    """A figure's markup, or the note that there is nothing to draw."""
    return spec_markup(div_id, spec) if spec is not None else f'<p class="muted">{esc(nothing)}</p>'


# --------------------------------------------------------------------------- overview


def _overview(runs: pd.DataFrame, current: pd.DataFrame, label: str) -> str:
    statuses = current["status"].fillna("running").value_counts()
    pairs = [
        (
            "Runs",
            f"{len(current)} standing for their cells"
            + (f" ({len(runs)} with retries)" if len(runs) != len(current) else ""),
        ),
        ("Agents", ", ".join(sorted(map(str, current["agent"].dropna().unique()))) or "-"),
        ("Benchmarks", ", ".join(sorted(map(str, current["benchmark"].dropna().unique()))) or "-"),
        ("Status", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "-"),
        ("Of", label),
    ]
    facts = (
        '<dl class="facts">'
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs)
        + "</dl>"
    )
    use = diagnostics.budget_use(runs)
    use["terminal_reasons"] = [
        ", ".join(f"{k} {v}" for k, v in r.items()) for r in use["terminal_reasons"]
    ]
    return (
        facts
        + "<h3>Budget use and failures</h3>"
        + _frame_table(
            use,
            [
                "agent",
                "benchmark",
                "runs",
                "budget_share",
                "episodes",
                "failed_episode_share",
                "submissions",
                "failed_submission_share",
                "terminal_reasons",
            ],
            [
                "agent",
                "Benchmark",
                "Runs",
                "budget share",
                "Episodes",
                "failed Episodes",
                "Submissions",
                "failed Submissions",
                "how they ended",
            ],
        )
    )


# --------------------------------------------------------------------------- leaderboard


def _leaderboard(runs: pd.DataFrame, colors: dict[str, str]) -> str:
    scores = diagnostics.score_table(runs)
    ranks = diagnostics.rank_scores(scores)
    rank_columns = [c for c in ranks.columns if c.startswith("rank_") and c != "rank_score"]
    board = _frame_table(
        ranks,
        ["agent", "rank_score", "benchmarks", *rank_columns],
        [
            "agent",
            "rank score",
            "Benchmarks",
            *(f"rank on {c.removeprefix('rank_')}" for c in rank_columns),
        ],
    )
    intervals = _frame_table(
        scores,
        ["agent", "benchmark", "runs", "scored", "mean", "sd", "ci_low", "ci_high"],
        ["agent", "Benchmark", "Runs", "scored", "mean", "SD", "95% low", "95% high"],
    )
    plot = _plot("plot-leaderboard", leaderboard_figure(scores, colors), "No scored Run.")
    note = (
        '<p class="note">Rank score: per Benchmark, agents ranked by mean held-out score '
        "(ties take the best rank; an agent with no scored Run ranks last), "
        "scored (K - rank) / (K - 1) and averaged over "
        "Benchmarks. A Run with no Assessment counts in Runs, not in the mean.</p>"
    )
    return board + note + plot + "<h3>Scores and intervals</h3>" + intervals


# --------------------------------------------------------------------------- best so far


_MATCHED_NOTE = (
    '<p class="note">A step is matched when every Submission so far ran on the same pool '
    "indices; "
    "an unmatched one compares scores taken on different Episodes (a reference point, not a "
    "comparison). Area: the mean of the best so far, normalized per Benchmark to [0, 1], over "
    "the budget.</p>"
)


def _best_so_far(runs: pd.DataFrame, submissions: pd.DataFrame, colors: dict[str, str]) -> str:
    current = diagnostics.current_runs(runs)
    curves = diagnostics.efficiency_curves(current, submissions)
    efficiency = diagnostics.improvement_efficiency(runs, submissions)["groups"]
    drawn = benchmark_best_figures(current, curves, colors)
    parts = [spec_markup(f"plot-best-{n}", spec) for n, (_name, spec) in enumerate(drawn)]
    if not drawn:
        parts.append('<p class="muted">No published Submission.</p>')
    area = _frame_table(
        efficiency,
        ["agent", "benchmark", "runs", "area", "steps", "unmatched_steps"],
        ["agent", "Benchmark", "Runs", "area", "steps", "unmatched steps"],
    )
    return "".join(parts) + _MATCHED_NOTE + area


# --------------------------------------------------------------------------- selection validity


def _selection(runs: pd.DataFrame, submissions: pd.DataFrame, colors: dict[str, str]) -> str:
    validity = diagnostics.selection_validity(runs, submissions)
    per_run = validity["runs"]
    plot = _plot(
        "plot-selection",
        selection_figure(per_run, colors),
        "No Run has both a Validation and an Assessment score.",
    )
    benchmarks = _frame_table(
        validity["benchmarks"],
        ["benchmark", "pairs", "spearman", "mean_gap"],
        ["Benchmark", "Runs with both", "Spearman", "mean gap (assessment - validation)"],
    )
    candidates = validity["candidates"]
    extra = (
        "<h3>Candidates assessed</h3>"
        + _frame_table(
            candidates, ["run_id", "candidates", "spearman"], ["Run", "candidates", "Spearman"]
        )
        if not candidates.empty
        else '<p class="note">Only the selected program of each Run was assessed (run with '
        "--assess-candidates to correlate every candidate).</p>"
    )
    return plot + benchmarks + extra


# --------------------------------------------------------------------------- edit dynamics


def _edits(runs: pd.DataFrame, submissions: pd.DataFrame) -> str:
    dynamics = diagnostics.edit_dynamics(runs, submissions)
    if dynamics.empty:
        return '<p class="muted">No Submission.</p>'
    plot = _plot("plot-edits", edits_figure(dynamics), "No Submission.")
    listing = _frame_table(
        dynamics,
        [
            "agent",
            "benchmark",
            "submissions",
            "synthesis",
            "parametric",
            "cosmetic",
            "none",
            "hits",
            "comparable",
            "hit_rate",
            "matched_hit_rate",
        ],
        [
            "agent",
            "Benchmark",
            "Submissions",
            "synthesis",
            "parametric",
            "cosmetic",
            "none",
            "hits",
            "comparable",
            "hit rate",
            "matched hit rate",
        ],
    )
    return plot + listing


# --------------------------------------------------------------------------- the Runs


def _runs(runs: pd.DataFrame) -> str:
    columns = [
        "run_id",
        "agent",
        "benchmark",
        "seed",
        "agent_seed",
        "attempt",
        "current",
        "status",
        "best_score",
        "validation_score",
        "assessment_score",
        "budget_used",
        "budget_total",
    ]
    present = [c for c in columns if c in runs.columns]
    rows = []
    for record in runs[present].to_dict("records"):
        values = [_value(record[c]) for c in present]
        rows.append([Markup(f"<code>{esc(values[0])}</code>"), *values[1:]])
    hint = (
        '<p class="note">A Run\'s own page: <code>evopolicy report RUN -o run.html</code> '
        "(timeline, diffs, transcript).</p>"
    )
    return (
        hint + f"<details><summary>{len(rows)} Runs</summary>" + table(present, rows) + "</details>"
    )


def experiment_sections(runs: pd.DataFrame, submissions: pd.DataFrame, label: str) -> list[Section]:
    """The sections of an experiment's page, from its ``runs_df`` and ``submissions_df``."""
    current = diagnostics.current_runs(runs)
    agents = sorted(map(str, current["agent"].dropna().unique()))
    colors = agent_colors(agents)
    return [
        Section("overview", "Overview", _overview(runs, current, label)),
        Section("leaderboard", "Leaderboard", _leaderboard(runs, colors)),
        Section("best", "Best so far", _best_so_far(runs, submissions, colors)),
        Section("selection", "Selection validity", _selection(runs, submissions, colors)),
        Section("edits", "Edit dynamics", _edits(runs, submissions)),
        Section("runs", "Runs", _runs(runs)),
    ]

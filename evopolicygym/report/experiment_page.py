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
from evopolicygym.report.html import Markup, Section, esc, table
from evopolicygym.report.plots import PALETTE, figure

__all__ = ["experiment_sections"]


def _value(value: Any) -> Any:
    """A frame's cell as a plain value: NA and NaN as None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _colors(agents: list[str]) -> dict[str, str]:
    return {agent: PALETTE[i % len(PALETTE)] for i, agent in enumerate(agents)}


def _frame_table(frame: pd.DataFrame, columns: list[str], headers: list[str] | None = None) -> str:
    rows = [[_value(row[c]) for c in columns] for row in frame.to_dict("records")]
    return table(headers or columns, rows)


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
    traces = []
    for agent in colors:
        mine = scores[scores["agent"] == agent]
        if mine.empty:
            continue
        means = [_value(v) for v in mine["mean"]]
        highs = [_value(v) for v in mine["ci_high"]]
        lows = [_value(v) for v in mine["ci_low"]]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": agent,
                "x": [str(b) for b in mine["benchmark"]],
                "y": means,
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        h - m if h is not None and m is not None else None
                        for h, m in zip(highs, means, strict=True)
                    ],
                    "arrayminus": [
                        m - lo if lo is not None and m is not None else None
                        for lo, m in zip(lows, means, strict=True)
                    ],
                },
                "marker": {"size": 11, "color": colors[agent]},
                "text": [
                    f"{int(n)} scored of {int(r)}"
                    for n, r in zip(mine["scored"], mine["runs"], strict=True)
                ],
                "hovertemplate": f"{esc(agent)} on %{{x}}: mean %{{y}} (%{{text}})<extra></extra>",
            }
        )
    plot = figure(
        "plot-leaderboard",
        traces,
        {
            "title": {
                "text": "Assessment score per agent and Benchmark: mean and 95% interval over seeds"
            },
            "scattermode": "group",
            "xaxis": {"title": {"text": "Benchmark"}, "type": "category"},
            "yaxis": {"title": {"text": "held-out score"}},
        },
    )
    note = (
        '<p class="note">Rank score: per Benchmark, agents ranked by mean held-out score '
        "(ties take the best rank; an agent with no scored Run ranks last), "
        "scored (K - rank) / (K - 1) and averaged over "
        "Benchmarks. A Run with no Assessment counts in Runs, not in the mean.</p>"
    )
    return board + note + plot + "<h3>Scores and intervals</h3>" + intervals


# --------------------------------------------------------------------------- best so far


def _mean_curve(steps: list[list[tuple[float, float]]], grid: list[float]) -> list[float | None]:
    """The mean over Runs of each Run's best so far at each point of ``grid`` (a Run counts
    from its first published Submission on)."""
    means: list[float | None] = []
    positions = [0] * len(steps)
    current: list[float | None] = [None] * len(steps)
    for x in grid:
        total, n = 0.0, 0
        for i, run in enumerate(steps):
            while positions[i] < len(run) and run[positions[i]][0] <= x:
                current[i] = run[positions[i]][1]
                positions[i] += 1
            if current[i] is not None:
                total += current[i]  # type: ignore[operator]
                n += 1
        means.append(total / n if n else None)
    return means


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
    parts = []
    ends = {
        str(r): _value(u) or 0
        for r, u in zip(current["run_id"], current["budget_used"], strict=True)
    }
    for n, benchmark in enumerate(sorted(map(str, current["benchmark"].dropna().unique()))):
        traces: list[dict[str, Any]] = []
        mine = curves[curves["benchmark"] == benchmark]
        for agent in colors:
            theirs = mine[mine["agent"] == agent]
            if theirs.empty:
                continue
            x: list[float | None] = []
            y: list[float | None] = []
            per_run: list[list[tuple[float, float]]] = []
            for run_id, group in theirs.groupby("run_id", sort=False):
                points = [
                    (float(e), float(b))
                    for e, b in zip(group["episodes_used"], group["best_so_far"], strict=True)
                ]
                per_run.append(points)
                end = max(float(ends.get(str(run_id), 0)), points[-1][0])
                x += [p[0] for p in points] + [end, None]
                y += [p[1] for p in points] + [points[-1][1], None]
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{agent}: each Run",
                    "legendgroup": agent,
                    "x": x,
                    "y": y,
                    "line": {"shape": "hv", "color": colors[agent], "width": 1},
                    "opacity": 0.25,
                    "hoverinfo": "skip",
                }
            )
            grid = sorted(
                {p[0] for run in per_run for p in run}
                | {float(ends.get(str(r), 0)) for r in theirs["run_id"]}
            )
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{agent}: mean of {len(per_run)} Runs",
                    "legendgroup": agent,
                    "x": grid,
                    "y": _mean_curve(per_run, grid),
                    "line": {"shape": "hv", "color": colors[agent], "width": 3},
                    "hovertemplate": (
                        f"{esc(agent)}: %{{x}} Episodes, mean best %{{y}}<extra></extra>"
                    ),
                }
            )
        unmatched = mine[mine["basis"] == "unmatched"]
        if not unmatched.empty:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": "unmatched step (scored on other Episodes)",
                    "x": [float(v) for v in unmatched["episodes_used"]],
                    "y": [float(v) for v in unmatched["best_so_far"]],
                    "marker": {"symbol": "circle-open", "size": 8, "color": "#555"},
                    "text": [
                        f"{r} #{s}"
                        for r, s in zip(
                            unmatched["run_id"], unmatched["submission_id"], strict=True
                        )
                    ],
                    "hovertemplate": "%{text}: unmatched (other Episodes)<extra></extra>",
                }
            )
        parts.append(
            figure(
                f"plot-best-{n}",
                traces,
                {
                    "title": {"text": f"{benchmark}: best so far vs Episodes used"},
                    "xaxis": {"title": {"text": "Episodes used"}},
                    "yaxis": {"title": {"text": "best published score"}},
                },
            )
        )
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
    traces = []
    for agent in colors:
        mine = per_run[
            (per_run["agent"] == agent)
            & per_run["validation_score"].notna()
            & per_run["assessment_score"].notna()
        ]
        if mine.empty:
            continue
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": agent,
                "x": [float(v) for v in mine["validation_score"]],
                "y": [float(v) for v in mine["assessment_score"]],
                "text": [
                    f"{r} ({b})" for r, b in zip(mine["run_id"], mine["benchmark"], strict=True)
                ],
                "marker": {"size": 8, "color": colors[agent], "opacity": 0.8},
                "hovertemplate": "%{text}: validation %{x}, assessment %{y}<extra></extra>",
            }
        )
    plot = figure(
        "plot-selection",
        traces,
        {
            "title": {"text": "Selected program: Validation vs Assessment score, per Run"},
            "xaxis": {"title": {"text": "validation score (selects)"}},
            "yaxis": {"title": {"text": "assessment score (held out, measures)"}},
        },
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
    labels = [f"{a} / {b}" for a, b in zip(dynamics["agent"], dynamics["benchmark"], strict=True)]
    kinds = {
        "synthesis": "#1f77b4",
        "parametric": "#2ca02c",
        "cosmetic": "#bcbd22",
        "none": "#c7c7c7",
    }
    traces: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": kind,
            "x": labels,
            "y": [_value(v) for v in dynamics[kind]],
            "marker": {"color": color},
            "hovertemplate": f"%{{x}}: {kind} %{{y:.0%}}<extra></extra>",
        }
        for kind, color in kinds.items()
    ]
    traces.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "hit rate (beat the parent on matched Episodes)",
            "x": labels,
            "y": [_value(v) for v in dynamics["hit_rate"]],
            "marker": {"symbol": "diamond", "size": 12, "color": "#d62728"},
            "hovertemplate": "%{x}: hit rate %{y:.0%}<extra></extra>",
        }
    )
    plot = figure(
        "plot-edits",
        traces,
        {
            "title": {"text": "Edit kinds (share of Submissions) and hit rate"},
            "barmode": "stack",
            "xaxis": {"type": "category"},
            "yaxis": {"title": {"text": "share"}, "tickformat": ".0%", "range": [0, 1.05]},
        },
    )
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
    colors = _colors(agents)
    return [
        Section("overview", "Overview", _overview(runs, current, label)),
        Section("leaderboard", "Leaderboard", _leaderboard(runs, colors)),
        Section("best", "Best so far", _best_so_far(runs, submissions, colors)),
        Section("selection", "Selection validity", _selection(runs, submissions, colors)),
        Section("edits", "Edit dynamics", _edits(runs, submissions)),
        Section("runs", "Runs", _runs(runs)),
    ]

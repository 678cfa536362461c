"""The report's figures as plotly specs: JSON data (``plots.figure_spec``), drawn by the static
report (``plots.spec_markup``) and by the live viewer (``Plotly.newPlot`` of the spec) alike.

A Run's figures read its ``RunSummary`` and its lineage (``run_data.lineage_of``), never
``RunData``: neither holds the Run's Episodes or transcript, so a viewer draws a long Run
without reading it into memory. Each returns None when it has nothing to draw.

Specs are data, never markup: plotly reads a label's ``<b>``, ``<a>``, ``<br>`` and entities
as its own markup, so every text from the record goes in through ``plain_label`` (after the
caller's ``redact``, where the report redacts it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evopolicygym.records.runs import RunSummary, SubmissionSummary
from evopolicygym.report.curves import best_so_far
from evopolicygym.report.html import fmt, plain
from evopolicygym.report.plots import PALETTE, figure_spec
from evopolicygym.report.run_data import Lineage, TimelineEvent

if TYPE_CHECKING:  # pandas is loaded where a page needs it, not on import
    import pandas as pd

__all__ = [
    "EDIT_COLORS",
    "agent_colors",
    "benchmark_best_figures",
    "best_so_far_figure",
    "budget_figure",
    "compare_figure",
    "edits_figure",
    "evolution_tree_figure",
    "experiment_figures",
    "leaderboard_figure",
    "plain_label",
    "selection_figure",
    "submissions_figure",
    "timeline_figure",
]

Redact = Callable[[str], str]
Spec = dict[str, Any]

# An edit's kind (``program_edits``) by colour, in every figure that shows it.
EDIT_COLORS = {
    "synthesis": "#1f77b4",
    "parametric": "#2ca02c",
    "cosmetic": "#bcbd22",
    "none": "#c7c7c7",
}
_UNKNOWN_EDIT = "#7f7f7f"  # no lineage (a program that cannot be read)


def plain_label(text: object) -> str:
    """``text`` as plotly shows it literally: ``&``, ``<`` and ``>`` as the entities plotly
    turns back into characters, so a recorded ``<b>`` or ``<a href>`` stays text."""
    if text is None:
        return ""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _evaluated(summary: RunSummary) -> list[SubmissionSummary]:
    """The Submissions whose evaluation started, in order."""
    subs = summary.submissions
    return [subs[k] for k in sorted(subs) if subs[k].budget_reserved is not None]


def _submission_axis(n: int) -> dict[str, Any]:
    return {"title": {"text": "Submission"}, "dtick": 1 if n <= 40 else None}


# --------------------------------------------------------------------------- one Run


def timeline_figure(events: Sequence[TimelineEvent], redact: Redact) -> Spec | None:
    """The Run's events over time, one row per kind of event."""
    if not events:
        return None
    start = events[0].at
    kinds = list(dict.fromkeys(e.kind for e in events))
    return figure_spec(
        [
            {
                "type": "scatter",
                "mode": "markers",
                "name": kind,
                "x": [(e.at - start) / 1e9 for e in events if e.kind == kind],
                "y": [kind] * sum(1 for e in events if e.kind == kind),
                "text": [plain_label(redact(e.text)) for e in events if e.kind == kind],
                "hovertemplate": "%{x:.2f} s: %{text}<extra></extra>",
                "marker": {"size": 9},
            }
            for kind in kinds
        ],
        {
            "title": {"text": "Events over time"},
            "xaxis": {"title": {"text": "seconds since the Run was created"}},
            "yaxis": {"automargin": True, "categoryorder": "array", "categoryarray": kinds[::-1]},
            "showlegend": False,
        },
        height=max(260, 40 + 26 * len(kinds)),
    )


def submissions_figure(summary: RunSummary, redact: Redact) -> Spec | None:
    """Each Submission's score (and its failed Episodes) and the budget used by then; a
    failed evaluation at the lowest score, its error (redacted) in its hover."""
    subs = _evaluated(summary)
    if not subs:
        return None
    published = [x for x in subs if x.status == "published" and x.score is not None]
    clean = [x for x in published if not x.failures]
    flawed = [x for x in published if x.failures]
    failed = [x for x in subs if x.status == "failed"]
    floor = min((x.score for x in published if x.score is not None), default=0.0)
    traces: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "budget used (Episodes)",
            "x": [x.submission_id for x in subs],
            "y": [x.budget_used for x in subs],
            "yaxis": "y2",
            "marker": {"color": "rgba(120,130,150,0.25)"},
            "hovertemplate": "#%{x}: %{y} Episodes used<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "score",
            "x": [x.submission_id for x in clean],
            "y": [x.score for x in clean],
            "marker": {"size": 10, "color": "#1f77b4"},
            "hovertemplate": "#%{x}: score %{y}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "score, with failed Episodes",
            "x": [x.submission_id for x in flawed],
            "y": [x.score for x in flawed],
            "text": [f"{x.failures} failed Episodes" for x in flawed],
            "marker": {"size": 10, "color": "#d62728"},
            "hovertemplate": "#%{x}: score %{y} (%{text})<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "evaluation failed",
            "x": [x.submission_id for x in failed],
            "y": [floor] * len(failed),
            "text": [plain_label(redact(x.error or "")) for x in failed],
            "marker": {"size": 12, "symbol": "x", "color": "#d62728"},
            "hovertemplate": "#%{x}: evaluation failed: %{text}<extra></extra>",
        },
    ]
    return figure_spec(
        traces,
        {
            "title": {"text": "Score per Submission"},
            "xaxis": _submission_axis(len(subs)),
            "yaxis": {"title": {"text": "score"}},
            "yaxis2": {
                "title": {"text": "Episodes used"},
                "overlaying": "y",
                "side": "right",
                "showgrid": False,
                "rangemode": "tozero",
                "tickformat": "d",
            },
        },
    )


def best_so_far_figure(summary: RunSummary, lineage: Mapping[int, Lineage]) -> Spec | None:
    """The best published score over Episodes used, each Submission marked by the evidence
    its comparison rests on (matched, or unmatched: scored on other Episodes)."""
    points = best_so_far(summary, lineage)
    if not points:
        return None
    matched = [p for p in points if p.evidence != "unmatched"]
    unmatched = [p for p in points if p.evidence == "unmatched"]
    traces = [
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv", "color": "#2ca02c", "width": 2},
            "name": "best so far",
            "x": [p.episodes_used for p in points],
            "y": [p.best for p in points],
            "hovertemplate": "%{x} Episodes: best %{y}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Submission, matched evidence",
            "x": [p.episodes_used for p in matched],
            "y": [p.score for p in matched],
            "text": [f"#{p.submission_id} ({p.evidence})" for p in matched],
            "marker": {"size": 10, "color": "#1f77b4"},
            "hovertemplate": "%{text}: %{y}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Submission, unmatched (other Episodes)",
            "x": [p.episodes_used for p in unmatched],
            "y": [p.score for p in unmatched],
            "text": [
                f"#{p.submission_id} (unmatched: scored on other Episodes)" for p in unmatched
            ],
            "marker": {
                "size": 10,
                "color": "#ff7f0e",
                "symbol": "circle-open",
                "line": {"width": 2},
            },
            "hovertemplate": "%{text}: %{y}<extra></extra>",
        },
    ]
    return figure_spec(
        traces,
        {
            "title": {"text": "Best so far vs Episodes used"},
            "xaxis": {"title": {"text": "Episodes used"}},
            "yaxis": {"title": {"text": "score"}},
        },
    )


def budget_figure(summary: RunSummary) -> Spec | None:
    """The Run's Episodes of budget used (reserved, never refunded) once each Submission was
    reserved, from 0 before the first, against the Run's episode budget."""
    subs = _evaluated(summary)
    if not subs:
        return None
    x, y = [0], [0]
    text = ["before the first Submission"]
    for sub in subs:
        used = sub.budget_used if sub.budget_used is not None else y[-1]
        x.append(sub.submission_id)
        y.append(used)
        reserved = sub.budget_reserved
        text.append(
            f"#{sub.submission_id} ({sub.status}): {reserved} Episode{'' if reserved == 1 else 's'}"
        )
    traces: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Episodes used",
            "x": x,
            "y": y,
            "text": text,
            "line": {"shape": "hv", "color": "#1f77b4", "width": 2},
            "marker": {"size": 7},
            "hovertemplate": "%{text}, %{y} used in all<extra></extra>",
        }
    ]
    budget = summary.episode_budget
    if budget is not None:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "episode budget",
                "x": [0, x[-1]],
                "y": [budget, budget],
                "line": {"dash": "dash", "color": "#d62728", "width": 2},
                "hovertemplate": "episode budget: %{y} Episodes<extra></extra>",
            }
        )
    return figure_spec(
        traces,
        {
            "title": {"text": "Episodes of budget used"},
            "xaxis": _submission_axis(len(subs)),
            "yaxis": {"title": {"text": "Episodes"}, "rangemode": "tozero"},
        },
    )


def _parent(sub: SubmissionSummary, line: Lineage | None) -> tuple[int | None, str | None]:
    """A Submission's parent (0: the initial program) and its basis: the lineage's (stated,
    else the nearest program), else the one the Agent named."""
    if line is not None and line.parent_submission_id is not None:
        return line.parent_submission_id, line.parent_basis
    if sub.parent_submission_id is not None:
        return sub.parent_submission_id, "stated"
    return None, None


def _kind_rank(kind: str | None) -> tuple[int, str]:
    """The kinds in ``EDIT_COLORS``'s order, then any other, then none known."""
    order = list(EDIT_COLORS)
    return (order.index(kind) if kind in order else len(order) + (kind is None), kind or "")


def _node_text(sub: SubmissionSummary, line: Lineage | None, outcome: str) -> str:
    parent, basis = _parent(sub, line)
    kind = line.edit_kind if line is not None and line.edit_kind else "edit unknown"
    told = "none" if parent is None else "initial" if parent == 0 else f"#{parent}"
    return " · ".join(
        [
            f"#{sub.submission_id}",
            outcome,
            plain_label(kind),
            f"parent {told}" + (f" ({plain_label(basis)})" if basis else ""),
        ]
    )


def _tree_edges(
    subs: list[SubmissionSummary], lineage: Mapping[int, Lineage], where: Mapping[int, float]
) -> dict[str, Any]:
    """One line trace of every parent-to-Submission edge, None between them."""
    x: list[int | None] = []
    y: list[float | None] = []
    for sub in subs:
        parent, _basis = _parent(sub, lineage.get(sub.submission_id))
        if parent is not None and parent in where:
            x += [parent, sub.submission_id, None]
            y += [where[parent], where[sub.submission_id], None]
    return {
        "type": "scatter",
        "mode": "lines",
        "name": "parent to Submission",
        "x": x,
        "y": y,
        "line": {"color": "#b0b6c2", "width": 1.5},
        "hoverinfo": "skip",
    }


def _tree_nodes(
    published: list[SubmissionSummary], lineage: Mapping[int, Lineage]
) -> list[dict[str, Any]]:
    """The published Submissions at their scores, one trace (a colour) per edit kind."""
    by_kind: dict[str | None, list[SubmissionSummary]] = {}
    for sub in published:
        line = lineage.get(sub.submission_id)
        by_kind.setdefault(line.edit_kind if line is not None else None, []).append(sub)
    return [
        {
            "type": "scatter",
            "mode": "markers",
            "name": plain_label(kind or "edit unknown"),
            "x": [x.submission_id for x in by_kind[kind]],
            "y": [x.score for x in by_kind[kind]],
            "text": [
                _node_text(x, lineage.get(x.submission_id), fmt(x.score)) for x in by_kind[kind]
            ],
            "marker": {
                "size": 11,
                "color": EDIT_COLORS.get(kind or "", _UNKNOWN_EDIT),
                "line": {"width": 1, "color": "#333"},
            },
            "hovertemplate": "%{text}<extra></extra>",
        }
        for kind in sorted(by_kind, key=_kind_rank)
    ]


def evolution_tree_figure(summary: RunSummary, lineage: Mapping[int, Lineage]) -> Spec | None:
    """The Programs as a tree over Submission number: the initial program at 0 (at its
    Validation score, else the lowest score), each Submission at its score, coloured by its
    edit's kind, a line from its parent (the lineage's, else the one the Agent named) to it;
    a failed one (an x) or one being evaluated (an open circle) at the lowest score."""
    subs = _evaluated(summary)
    if not subs:
        return None
    published = [x for x in subs if x.status == "published" and x.score is not None]
    reference = summary.reference_score
    floor = min(
        [x.score for x in published if x.score is not None]
        + ([reference] if reference is not None else []),
        default=0.0,
    )
    where = {0: reference if reference is not None else floor}  # Submission -> its y
    for sub in subs:
        where[sub.submission_id] = floor
    for sub in published:
        where[sub.submission_id] = sub.score if sub.score is not None else floor
    traces: list[dict[str, Any]] = [
        _tree_edges(subs, lineage, where),
        {
            "type": "scatter",
            "mode": "markers",
            "name": "initial program",
            "x": [0],
            "y": [where[0]],
            "text": [
                "initial program"
                + (f" · validation {fmt(reference)}" if reference is not None else "")
            ],
            "marker": {"size": 14, "symbol": "diamond", "color": "#333"},
            "hovertemplate": "%{text}<extra></extra>",
        },
        *_tree_nodes(published, lineage),
    ]
    for status, name, marker in (
        ("failed", "evaluation failed", {"size": 12, "symbol": "x", "color": "#d62728"}),
        ("evaluating", "being evaluated", {"size": 11, "symbol": "circle-open", "color": "#555"}),
    ):
        mine = [x for x in subs if x.status == status]
        if mine:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": name,
                    "x": [x.submission_id for x in mine],
                    "y": [floor] * len(mine),
                    "text": [_node_text(x, lineage.get(x.submission_id), name) for x in mine],
                    "marker": marker,
                    "hovertemplate": "%{text}<extra></extra>",
                }
            )
    return figure_spec(
        traces,
        {
            "title": {"text": "Evolution of the Program"},
            "xaxis": _submission_axis(len(subs)),
            "yaxis": {"title": {"text": "score"}},
        },
    )


def compare_figure(series: Sequence[tuple[str, RunSummary, Mapping[int, Lineage]]]) -> Spec | None:
    """Several Runs' best so far over Episodes used, on one plot: one line per Run that has
    a published Submission (``label``, its summary and lineage), in ``PALETTE`` order by its
    place in ``series``, held to the budget the Run has used."""
    traces: list[dict[str, Any]] = []
    for i, (label, summary, lineage) in enumerate(series):
        points = best_so_far(summary, lineage)
        if not points:
            continue
        end = max(summary.budget_used, points[-1].episodes_used)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": plain_label(label),
                "x": [p.episodes_used for p in points] + [end],
                "y": [p.best for p in points] + [points[-1].best],
                "text": [f"#{p.submission_id} ({p.evidence})" for p in points]
                + ["budget used so far"],
                "line": {"shape": "hv", "color": PALETTE[i % len(PALETTE)], "width": 2},
                "hovertemplate": "%{text}: best %{y} at %{x} Episodes<extra></extra>",
            }
        )
    if not traces:
        return None
    return figure_spec(
        traces,
        {
            "title": {"text": "Best so far vs Episodes used"},
            "xaxis": {"title": {"text": "Episodes used"}},
            "yaxis": {"title": {"text": "best published score"}},
        },
    )


# --------------------------------------------------------------------------- many Runs


def agent_colors(agents: Sequence[str]) -> dict[str, str]:
    """Each agent's colour, in ``PALETTE`` order: the same in every figure of a page."""
    return {agent: PALETTE[i % len(PALETTE)] for i, agent in enumerate(agents)}


def leaderboard_figure(scores: pd.DataFrame, colors: Mapping[str, str]) -> Spec | None:
    """Each agent's mean held-out score per Benchmark with its 95% interval, from
    ``diagnostics.score_table``."""
    traces = []
    for agent in colors:
        mine = scores[scores["agent"] == agent]
        if mine.empty:
            continue
        means = [plain(v) for v in mine["mean"]]
        highs = [plain(v) for v in mine["ci_high"]]
        lows = [plain(v) for v in mine["ci_low"]]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": plain_label(agent),
                "x": [plain_label(b) for b in mine["benchmark"]],
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
                "hovertemplate": (
                    f"{plain_label(agent)} on %{{x}}: mean %{{y}} (%{{text}})<extra></extra>"
                ),
            }
        )
    if not traces:
        return None
    return figure_spec(
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
            value = current[i]
            if value is not None:
                total += value
                n += 1
        means.append(total / n if n else None)
    return means


def _agent_curves(
    theirs: pd.DataFrame, agent: str, color: str, ends: Mapping[str, float]
) -> list[dict[str, Any]]:
    """One agent's Runs on one Benchmark: each Run's best so far, faint, and their mean."""
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
    grid = sorted(
        {p[0] for run in per_run for p in run}
        | {float(ends.get(str(r), 0)) for r in theirs["run_id"]}
    )
    name = plain_label(agent)
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{name}: each Run",
            "legendgroup": name,
            "x": x,
            "y": y,
            "line": {"shape": "hv", "color": color, "width": 1},
            "opacity": 0.25,
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{name}: mean of {len(per_run)} Runs",
            "legendgroup": name,
            "x": grid,
            "y": _mean_curve(per_run, grid),
            "line": {"shape": "hv", "color": color, "width": 3},
            "hovertemplate": f"{name}: %{{x}} Episodes, mean best %{{y}}<extra></extra>",
        },
    ]


def benchmark_best_figures(
    current: pd.DataFrame, curves: pd.DataFrame, colors: Mapping[str, str]
) -> list[tuple[str, Spec]]:
    """Per Benchmark of ``current`` (``diagnostics.current_runs``), in order, its best so far
    over Episodes used from ``diagnostics.efficiency_curves``: each Run and the mean per
    agent, unmatched steps marked. (Benchmark, spec); none for a Benchmark with no curve."""
    ends = {
        str(r): plain(u) or 0
        for r, u in zip(current["run_id"], current["budget_used"], strict=True)
    }
    found: list[tuple[str, Spec]] = []
    for benchmark in sorted(map(str, current["benchmark"].dropna().unique())):
        traces: list[dict[str, Any]] = []
        mine = curves[curves["benchmark"] == benchmark]
        for agent in colors:
            theirs = mine[mine["agent"] == agent]
            if not theirs.empty:
                traces += _agent_curves(theirs, agent, colors[agent], ends)
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
                        f"{plain_label(r)} #{s}"
                        for r, s in zip(
                            unmatched["run_id"], unmatched["submission_id"], strict=True
                        )
                    ],
                    "hovertemplate": "%{text}: unmatched (other Episodes)<extra></extra>",
                }
            )
        if not traces:
            continue
        spec = figure_spec(
            traces,
            {
                "title": {"text": f"{plain_label(benchmark)}: best so far vs Episodes used"},
                "xaxis": {"title": {"text": "Episodes used"}},
                "yaxis": {"title": {"text": "best published score"}},
            },
        )
        found.append((benchmark, spec))
    return found


def selection_figure(per_run: pd.DataFrame, colors: Mapping[str, str]) -> Spec | None:
    """Each Run's selected program, its Validation score against its Assessment score, from
    ``diagnostics.selection_validity(...)["runs"]``."""
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
                "name": plain_label(agent),
                "x": [float(v) for v in mine["validation_score"]],
                "y": [float(v) for v in mine["assessment_score"]],
                "text": [
                    plain_label(f"{r} ({b})")
                    for r, b in zip(mine["run_id"], mine["benchmark"], strict=True)
                ],
                "marker": {"size": 8, "color": colors[agent], "opacity": 0.8},
                "hovertemplate": "%{text}: validation %{x}, assessment %{y}<extra></extra>",
            }
        )
    if not traces:
        return None
    return figure_spec(
        traces,
        {
            "title": {"text": "Selected program: Validation vs Assessment score, per Run"},
            "xaxis": {"title": {"text": "validation score (selects)"}},
            "yaxis": {"title": {"text": "assessment score (held out, measures)"}},
        },
    )


def edits_figure(dynamics: pd.DataFrame) -> Spec | None:
    """Each agent and Benchmark's share of edits by kind, stacked, and its hit rate, from
    ``diagnostics.edit_dynamics``."""
    if dynamics.empty:
        return None
    labels = [
        plain_label(f"{a} / {b}")
        for a, b in zip(dynamics["agent"], dynamics["benchmark"], strict=True)
    ]
    traces: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": kind,
            "x": labels,
            "y": [plain(v) for v in dynamics[kind]],
            "marker": {"color": color},
            "hovertemplate": f"%{{x}}: {kind} %{{y:.0%}}<extra></extra>",
        }
        for kind, color in EDIT_COLORS.items()
    ]
    traces.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "hit rate (beat the parent on matched Episodes)",
            "x": labels,
            "y": [plain(v) for v in dynamics["hit_rate"]],
            "marker": {"symbol": "diamond", "size": 12, "color": "#d62728"},
            "hovertemplate": "%{x}: hit rate %{y:.0%}<extra></extra>",
        }
    )
    return figure_spec(
        traces,
        {
            "title": {"text": "Edit kinds (share of Submissions) and hit rate"},
            "barmode": "stack",
            "xaxis": {"type": "category"},
            "yaxis": {"title": {"text": "share"}, "tickformat": ".0%", "range": [0, 1.05]},
        },
    )


def experiment_figures(runs: pd.DataFrame, submissions: pd.DataFrame) -> list[tuple[str, Spec]]:
    """The figures of an experiment's page, from its ``runs_df`` and ``submissions_df``, as
    (the report's figure id, spec): ``plot-leaderboard``, ``plot-best-<n>`` per Benchmark,
    ``plot-selection``, ``plot-edits``; a figure with nothing to draw is left out."""
    from evopolicygym.analysis import diagnostics  # pandas: loaded by the pages that need it

    current = diagnostics.current_runs(runs)
    colors = agent_colors(sorted(map(str, current["agent"].dropna().unique())))
    curves = diagnostics.efficiency_curves(current, submissions)
    drawn: list[tuple[str, Spec | None]] = [
        ("plot-leaderboard", leaderboard_figure(diagnostics.score_table(runs), colors)),
        *(
            (f"plot-best-{n}", spec)
            for n, (_benchmark, spec) in enumerate(benchmark_best_figures(current, curves, colors))
        ),
        (
            "plot-selection",
            selection_figure(diagnostics.selection_validity(runs, submissions)["runs"], colors),
        ),
        ("plot-edits", edits_figure(diagnostics.edit_dynamics(runs, submissions))),
    ]
    return [(name, spec) for name, spec in drawn if spec is not None]

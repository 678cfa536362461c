"""The study's diagnostics: pure functions over ``runs_df`` and ``submissions_df``.

Every figure is per agent x Benchmark (the ``agent`` and ``benchmark`` columns: an
experiment's labels, else the agent's name and the Benchmark id), over the Runs given.
Where the frames hold an experiment's retried cells (``current`` not NA), only the Run
standing for each cell counts.

- ``score_table``: n Runs, n scored, mean, SD and a 95% t-interval of the held-out
  Assessment score over seeds. A Run without one (it handed nothing off, or a fault
  ended it first) is **not** given a score: it counts in ``runs`` and ``unscored``,
  and the mean, SD and interval are over the ``scored`` Runs only.
- ``rank_scores``: the paper's rank score. Per Benchmark the K agents are ranked by mean
  Assessment score in the Benchmark's direction, ties taking the best rank (1 + the
  agents strictly better); an agent with no scored Run there ranks after every agent
  with one. Its score there is (K - rank) / (K - 1), 1 for K = 1; the rank score is the
  mean over Benchmarks (with K = 5 it is the paper's (5 - rank) / 4).
- ``selection_validity``: per Run, the selected Program's Validation score beside its
  Assessment score (``gap`` = assessment - validation); per Benchmark the Spearman rank
  correlation of the two across Runs; per Run, where at least two candidates were
  assessed, the Spearman correlation of the candidates' Validation and Assessment scores.
- ``efficiency_curves`` / ``improvement_efficiency``: best-so-far published score
  against Episodes used, one step per Submission that raised it, each step marked
  ``first``, ``matched`` (every Submission so far ran on the same pool indices) or
  ``unmatched``; scores normalized per Benchmark to [0, 1] between the worst and best
  published score of the Runs given (in its direction; 1 where all are equal). The
  area is the mean of the normalized best-so-far over the budget (0 before the first
  published Submission): 1 is the best score from the first Episode on.
- ``edit_dynamics``: the shares of ``synthesis`` / ``parametric`` / ``cosmetic`` /
  ``none`` edits against the parent, and the hit rate: the share of Submissions that
  beat their parent on matched indices (``hit_rate``, over every Submission;
  ``matched_hit_rate``, over those with a matched comparison).
- ``budget_use``: the mean share of the budget spent, the share of Episodes and of
  Submissions that failed, and how the Runs ended (a count per terminal reason).

``study`` gathers them all as plain values (``evopolicy experiment summary --json``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from evopolicygym.program_edits import EDIT_KINDS
from evopolicygym.records.runs import better

__all__ = [
    "GROUP",
    "budget_use",
    "current_runs",
    "edit_dynamics",
    "efficiency_curves",
    "improvement_efficiency",
    "rank_scores",
    "score_table",
    "selection_validity",
    "spearman",
    "study",
    "t_quantile",
]

GROUP = ["agent", "benchmark"]

# Two-sided 95% quantiles of Student's t (0.975) by degrees of freedom; between rows
# the next lower row is taken (a slightly wider, conservative interval).
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}
_Z975 = 1.960


def t_quantile(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (``df`` >= 1)."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if df > 120:
        return _Z975 if df > 1000 else _T975[120]
    return _T975[max(k for k in _T975 if k <= df)]


def current_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The Runs that count: with experiment cells, only each cell's current attempt."""
    if "current" in runs and runs["current"].notna().any():
        return runs[runs["current"].fillna(False).astype(bool)]
    return runs


def _direction(frame: pd.DataFrame) -> str:
    found = frame["score_direction"].dropna().unique()
    return str(found[0]) if len(found) else "maximize"


def _float(value: Any) -> float | None:
    return (
        None
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
        else float(value)
    )


# --------------------------------------------------------------------------- scores


def score_table(runs: pd.DataFrame, score: str = "assessment_score") -> pd.DataFrame:
    """Per agent x Benchmark: ``runs``, ``scored``, ``unscored``, ``mean``, ``sd``,
    ``ci_low``, ``ci_high`` (95% t-interval of the mean) and ``score_direction``."""
    rows = []
    for (agent, benchmark), group in current_runs(runs).groupby(GROUP, sort=True, dropna=False):
        values = [float(v) for v in group[score] if _float(v) is not None]
        n = len(values)
        mean = sum(values) / n if n else math.nan
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.nan
        half = t_quantile(n - 1) * sd / math.sqrt(n) if n > 1 else math.nan
        rows.append(
            {
                "agent": agent,
                "benchmark": benchmark,
                "runs": len(group),
                "scored": n,
                "unscored": len(group) - n,
                "mean": mean,
                "sd": sd,
                "ci_low": mean - half,
                "ci_high": mean + half,
                "score_direction": _direction(group),
            }
        )
    columns = [
        "agent",
        "benchmark",
        "runs",
        "scored",
        "unscored",
        "mean",
        "sd",
        "ci_low",
        "ci_high",
        "score_direction",
    ]
    return pd.DataFrame(rows, columns=columns)


def _ranks(means: dict[str, float | None], direction: str) -> dict[str, int]:
    """Competition ranks (ties take the best rank); agents without a mean rank last."""
    scored = {a: m for a, m in means.items() if m is not None}
    ranks = {
        a: 1 + sum(better(o, m, direction) for o in scored.values()) for a, m in scored.items()
    }
    last = len(scored) + 1
    return {a: ranks.get(a, last) for a in means}


def rank_scores(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent: ``rank_score`` (the mean over Benchmarks of (K - rank) / (K - 1)),
    ``benchmarks`` counted, and ``rank_<benchmark>`` per Benchmark; best first."""
    agents = sorted(table["agent"].unique()) if len(table) else []
    k = len(agents)
    per_agent: dict[str, dict[str, Any]] = {a: {"agent": a} for a in agents}
    scores: dict[str, list[float]] = {a: [] for a in agents}
    for benchmark, group in table.groupby("benchmark", sort=True):
        means: dict[str, float | None] = {a: None for a in agents}
        for row in group.itertuples():
            means[str(row.agent)] = _float(row.mean)
        for agent, rank in _ranks(means, _direction(group)).items():
            per_agent[agent][f"rank_{benchmark}"] = rank
            scores[agent].append(1.0 if k == 1 else (k - rank) / (k - 1))
    rows = [
        {
            **per_agent[a],
            "rank_score": sum(scores[a]) / len(scores[a]) if scores[a] else math.nan,
            "benchmarks": len(scores[a]),
        }
        for a in agents
    ]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["agent", "rank_score", "benchmarks"])
    ordered = [
        "agent",
        "rank_score",
        "benchmarks",
        *sorted(c for c in frame.columns if c.startswith("rank_") and c != "rank_score"),
    ]
    return (
        frame[ordered]
        .sort_values(["rank_score", "agent"], ascending=[False, True], kind="stable")
        .reset_index(drop=True)
    )


# --------------------------------------------------------------------------- selection validity


def spearman(x: Iterable[Any], y: Iterable[Any]) -> float | None:
    """Spearman's rank correlation of the pairs where both are known (average ranks for
    ties); None with fewer than 3 pairs or where either side is constant."""
    pairs = [
        (a, b) for a, b in zip(x, y, strict=True) if _float(a) is not None and _float(b) is not None
    ]
    if len(pairs) < 3:
        return None
    rx = pd.Series([float(a) for a, _ in pairs]).rank(method="average")
    ry = pd.Series([float(b) for _, b in pairs]).rank(method="average")
    dx, dy = rx - rx.mean(), ry - ry.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return None if denominator == 0 else float((dx * dy).sum()) / denominator


def selection_validity(runs: pd.DataFrame, submissions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``runs``: per Run the selected Program's validation and assessment scores and their
    gap; ``benchmarks``: per Benchmark the Spearman correlation across Runs (n pairs);
    ``candidates``: per Run with two or more assessed candidates, their correlation."""
    kept = current_runs(runs)
    per_run = kept[["run_id", *GROUP, "validation_score", "assessment_score"]].copy()
    per_run["gap"] = per_run["assessment_score"] - per_run["validation_score"]
    rows = []
    for benchmark, group in kept.groupby("benchmark", sort=True):
        both = group[group["validation_score"].notna() & group["assessment_score"].notna()]
        rows.append(
            {
                "benchmark": benchmark,
                "pairs": len(both),
                "spearman": spearman(both["validation_score"], both["assessment_score"]),
                "mean_gap": float((both["assessment_score"] - both["validation_score"]).mean())
                if len(both)
                else None,
            }
        )
    candidates = []
    chosen = submissions[submissions["run_id"].isin(set(kept["run_id"]))]
    assessed = chosen[
        chosen["candidate"].fillna(False).astype(bool) & chosen["assessment_score"].notna()
    ]
    for run_id, group in assessed.groupby("run_id", sort=True):
        if len(group) >= 2:
            candidates.append(
                {
                    "run_id": run_id,
                    "candidates": len(group),
                    "spearman": spearman(group["validation_score"], group["assessment_score"]),
                }
            )
    return {
        "runs": per_run.reset_index(drop=True),
        "benchmarks": pd.DataFrame(rows, columns=["benchmark", "pairs", "spearman", "mean_gap"]),
        "candidates": pd.DataFrame(candidates, columns=["run_id", "candidates", "spearman"]),
    }


# --------------------------------------------------------------------------- improvement efficiency


def _bounds(labelled: pd.DataFrame) -> dict[str, tuple[float, float]]:
    published = labelled[
        labelled["published"].fillna(False).astype(bool) & labelled["score"].notna()
    ]
    return {
        str(b): (float(g["score"].min()), float(g["score"].max()))
        for b, g in published.groupby("benchmark")
    }


def _normalized(score: float, bounds: tuple[float, float], direction: str) -> float:
    lo, hi = bounds
    if hi == lo:
        return 1.0
    return (hi - score) / (hi - lo) if direction == "minimize" else (score - lo) / (hi - lo)


def efficiency_curves(runs: pd.DataFrame, submissions: pd.DataFrame) -> pd.DataFrame:
    """One row per step of each Run's best-so-far: ``run_id``, ``agent``, ``benchmark``,
    ``submission_id``, ``episodes_used`` (the Run's, when it was known), ``best_so_far``,
    ``normalized`` (see the module) and ``basis`` (first, matched, unmatched)."""
    labelled = _labelled(runs, submissions)
    bounds = _bounds(labelled)
    rows = []
    steps = labelled[labelled["best_so_far"].fillna(False).astype(bool)]
    for sub in steps.itertuples():
        rows.append(
            {
                "run_id": sub.run_id,
                "agent": sub.agent,
                "benchmark": sub.benchmark,
                "submission_id": sub.submission_id,
                "episodes_used": sub.cumulative_episodes,
                "best_so_far": sub.best_so_far_score,
                "normalized": _normalized(
                    float(sub.best_so_far_score),
                    bounds[str(sub.benchmark)],
                    str(sub.score_direction),
                ),
                "basis": sub.best_so_far_basis,
            }
        )
    columns = [
        "run_id",
        "agent",
        "benchmark",
        "submission_id",
        "episodes_used",
        "best_so_far",
        "normalized",
        "basis",
    ]
    return pd.DataFrame(rows, columns=columns)


def _area(steps: pd.DataFrame, budget: float) -> float:
    """Mean over [0, budget] of the step function that takes each step's value from its
    Episodes used on (0 before the first)."""
    area, value, at = 0.0, 0.0, 0.0
    for step in steps.sort_values("episodes_used", kind="stable").itertuples():
        x = min(float(step.episodes_used), budget)
        area += value * (x - at)
        value, at = float(step.normalized), x
    area += value * (budget - at)
    return area / budget if budget > 0 else math.nan


def improvement_efficiency(
    runs: pd.DataFrame, submissions: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """``runs``: per Run its normalized ``area``, ``steps`` and ``unmatched_steps`` of its
    best-so-far; ``groups``: per agent x Benchmark the mean area over its Runs (``runs``)."""
    kept = current_runs(runs)
    curves = efficiency_curves(kept, submissions)
    per_run = []
    # One split of the curves by Run, not one filter of the whole frame per Run (quadratic
    # in Runs: 1,000 Runs spent seconds here).
    by_run = dict(tuple(curves.groupby("run_id", sort=False))) if len(curves) else {}
    empty = curves.iloc[0:0]
    for run in kept.itertuples():
        steps = by_run.get(run.run_id, empty)
        budget = _float(run.budget_total) or _float(run.budget_used) or 0.0
        per_run.append(
            {
                "run_id": run.run_id,
                "agent": run.agent,
                "benchmark": run.benchmark,
                "area": _area(steps, budget) if budget else math.nan,
                "steps": len(steps),
                "unmatched_steps": int((steps["basis"] == "unmatched").sum()),
            }
        )
    frame = pd.DataFrame(per_run, columns=["run_id", *GROUP, "area", "steps", "unmatched_steps"])
    groups = (
        frame.groupby(GROUP, sort=True)
        .agg(
            runs=("run_id", "count"),
            area=("area", "mean"),
            unmatched_steps=("unmatched_steps", "sum"),
            steps=("steps", "sum"),
        )
        .reset_index()
        if len(frame)
        else pd.DataFrame(columns=[*GROUP, "runs", "area", "unmatched_steps", "steps"])
    )
    return {"runs": frame, "groups": groups}


# -------------------------------------------------------------------------- edits, budget, failures


def _labelled(runs: pd.DataFrame, submissions: pd.DataFrame) -> pd.DataFrame:
    kept = current_runs(runs)
    return submissions.merge(kept[["run_id", *GROUP]], on="run_id", how="inner")


def edit_dynamics(runs: pd.DataFrame, submissions: pd.DataFrame) -> pd.DataFrame:
    """Per agent x Benchmark: ``submissions``, the share of each edit kind, ``hits``
    (beat the parent on matched indices), ``comparable`` (had a matched comparison),
    ``hit_rate`` (hits / submissions) and ``matched_hit_rate`` (hits / comparable)."""
    rows = []
    for (agent, benchmark), group in _labelled(runs, submissions).groupby(GROUP, sort=True):
        n = len(group)
        beats = group["beats_parent"]
        hits = int(beats.fillna(False).astype(bool).sum())
        comparable = int(beats.notna().sum())
        row: dict[str, Any] = {"agent": agent, "benchmark": benchmark, "submissions": n}
        for kind in EDIT_KINDS[::-1]:
            row[kind] = float((group["edit_kind"] == kind).sum()) / n if n else math.nan
        row.update(
            hits=hits,
            comparable=comparable,
            hit_rate=hits / n if n else math.nan,
            matched_hit_rate=hits / comparable if comparable else math.nan,
        )
        rows.append(row)
    columns = [
        *GROUP,
        "submissions",
        *EDIT_KINDS[::-1],
        "hits",
        "comparable",
        "hit_rate",
        "matched_hit_rate",
    ]
    return pd.DataFrame(rows, columns=columns)


def budget_use(runs: pd.DataFrame) -> pd.DataFrame:
    """Per agent x Benchmark: ``runs``, ``budget_share`` (mean share of the budget spent),
    ``episodes``, ``failed_episode_share``, ``submissions``, ``failed_submission_share``,
    and ``terminal_reasons`` (a dict of counts, ``running`` for a Run not ended)."""
    rows = []
    for (agent, benchmark), group in current_runs(runs).groupby(GROUP, sort=True):
        episodes = int(group["episodes"].sum())
        submitted = int(group["submissions"].sum())
        reasons = group["status"].fillna("running").value_counts()
        rows.append(
            {
                "agent": agent,
                "benchmark": benchmark,
                "runs": len(group),
                "budget_share": float(group["budget_share"].mean()),
                "episodes": episodes,
                "failed_episode_share": int(group["failed_episodes"].sum()) / episodes
                if episodes
                else math.nan,
                "submissions": submitted,
                "failed_submission_share": int(group["failed"].sum()) / submitted
                if submitted
                else math.nan,
                "terminal_reasons": {str(k): int(v) for k, v in sorted(reasons.items())},
            }
        )
    columns = [
        *GROUP,
        "runs",
        "budget_share",
        "episodes",
        "failed_episode_share",
        "submissions",
        "failed_submission_share",
        "terminal_reasons",
    ]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------- all of it


def _plain(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-able values: NaN and NA become None, numpy scalars Python ones."""
    rows = []
    for record in frame.to_dict("records"):
        row: dict[str, Any] = {}
        for key, value in record.items():
            if isinstance(value, dict):
                row[str(key)] = value
            elif (
                value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
            ):
                row[str(key)] = None
            elif hasattr(value, "item"):
                row[str(key)] = value.item()
            else:
                row[str(key)] = value
        rows.append(row)
    return rows


def _leaderboard(board: pd.DataFrame) -> list[dict[str, Any]]:
    """The rank scores as plain rows, each Benchmark's rank under ``ranks`` (a Benchmark's
    label is data, not a key name)."""
    rows = []
    for row in _plain(board):
        ranks = {
            k.removeprefix("rank_"): row.pop(k)
            for k in list(row)
            if k.startswith("rank_") and k != "rank_score"
        }
        rows.append({**row, "ranks": ranks})
    return rows


def study(runs: pd.DataFrame, submissions: pd.DataFrame) -> dict[str, Any]:
    """Every diagnostic as plain values: ``runs`` (how many count), ``scores``,
    ``leaderboard`` (per agent ``rank_score``, ``benchmarks`` and ``ranks`` by Benchmark),
    ``selection_validity``, ``improvement_efficiency``, ``edit_dynamics`` and ``budget_use``."""
    table = score_table(runs)
    validity = selection_validity(runs, submissions)
    efficiency = improvement_efficiency(runs, submissions)
    return {
        "runs": len(current_runs(runs)),
        "scores": _plain(table),
        "leaderboard": _leaderboard(rank_scores(table)),
        "selection_validity": {
            "benchmarks": _plain(validity["benchmarks"]),
            "runs": _plain(validity["runs"]),
            "candidates": _plain(validity["candidates"]),
        },
        "improvement_efficiency": {
            "groups": _plain(efficiency["groups"]),
            "runs": _plain(efficiency["runs"]),
        },
        "edit_dynamics": _plain(edit_dynamics(runs, submissions)),
        "budget_use": _plain(budget_use(runs)),
    }

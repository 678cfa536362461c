"""Analysis: pandas DataFrames over a store's Runs, and the study's diagnostics.

``runs_df``, ``submissions_df``, ``episodes_df``, ``messages_df`` and ``events_df``
(``analysis.frames``, whose docstring documents every column and dtype) read Runs with
the Run read API, with the same Host-private exclusions as the exports.
``analysis.diagnostics`` computes the study's figures from them: per agent x Benchmark
scores with intervals, the rank score, selection validity, improvement efficiency,
edit dynamics, budget use and failure shares.

    from evopolicygym.analysis import runs_df
    runs = runs_df("evopolicy-store", experiment="quick")
    runs[runs.current].groupby(["agent", "benchmark"]).assessment_score.agg(["mean", "std", "count"])

    from evopolicygym.analysis import diagnostics, submissions_df
    diagnostics.rank_scores(diagnostics.score_table(runs))
"""

from __future__ import annotations

from evopolicygym.analysis import diagnostics
from evopolicygym.analysis.frames import (
    EPISODES_COLUMNS,
    EVENTS_COLUMNS,
    MESSAGES_COLUMNS,
    RUNS_COLUMNS,
    SUBMISSIONS_COLUMNS,
    episodes_df,
    events_df,
    messages_df,
    runs_df,
    submissions_df,
)

__all__ = [
    "EPISODES_COLUMNS",
    "EVENTS_COLUMNS",
    "MESSAGES_COLUMNS",
    "RUNS_COLUMNS",
    "SUBMISSIONS_COLUMNS",
    "diagnostics",
    "episodes_df",
    "events_df",
    "messages_df",
    "runs_df",
    "submissions_df",
]

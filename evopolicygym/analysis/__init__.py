"""Analysis: pandas DataFrames over a store's Runs, and the study's diagnostics.

``runs_df``, ``submissions_df``, ``episodes_df``, ``messages_df`` and ``events_df``
(``analysis.dataframes``, whose docstring documents every column and dtype) read Runs with
the Run read API, with the same Host-private exclusions as the exports.
``analysis.diagnostics`` computes the study's figures from them: per agent x Benchmark
scores with intervals, the rank score, selection validity, improvement efficiency,
edit dynamics, budget use and failure shares. Names load on first use: importing the
package alone does not import pandas.

    from evopolicygym.analysis import runs_df
    runs = runs_df("evopolicy-store", experiment="quick")
    current = runs[runs.current]
    current.groupby(["agent", "benchmark"]).assessment_score.agg(["mean", "std", "count"])

    from evopolicygym.analysis import diagnostics, submissions_df
    diagnostics.rank_scores(diagnostics.score_table(runs))
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "diagnostics": "evopolicygym.analysis",
    "EPISODES_COLUMNS": "evopolicygym.analysis.dataframes",
    "EVENTS_COLUMNS": "evopolicygym.analysis.dataframes",
    "MESSAGES_COLUMNS": "evopolicygym.analysis.dataframes",
    "RUNS_COLUMNS": "evopolicygym.analysis.dataframes",
    "SUBMISSIONS_COLUMNS": "evopolicygym.analysis.dataframes",
    "episodes_df": "evopolicygym.analysis.dataframes",
    "events_df": "evopolicygym.analysis.dataframes",
    "messages_df": "evopolicygym.analysis.dataframes",
    "runs_df": "evopolicygym.analysis.dataframes",
    "submissions_df": "evopolicygym.analysis.dataframes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

"""Evaluation: one Program over a bounded list of Episodes, each Episode in a fresh
contained policy process.

The public names load lazily: the policy fork server and the runner processes start
from modules of this package (``forkserver``, ``runner``), and an eager import here
would have every one of them load the engine, the Benchmark contract and Ray's
executor before serving (tens of milliseconds at each evaluation's start, and pages
every policy process inherits).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "EpisodeSummary": "evopolicygym.evaluation.config",
    "EvaluationConfig": "evopolicygym.evaluation.config",
    "EvaluationError": "evopolicygym.evaluation.config",
    "EvaluationResult": "evopolicygym.evaluation.config",
    "PlannedEpisode": "evopolicygym.evaluation.config",
    "plan_episodes": "evopolicygym.evaluation.config",
    "require_failure_score": "evopolicygym.evaluation.config",
    "Evaluator": "evopolicygym.evaluation.engine",
    "evaluate": "evopolicygym.evaluation.engine",
    "EXECUTORS": "evopolicygym.evaluation.executors",
    "make_evaluator": "evopolicygym.evaluation.executors",
    "RAY_MISSING": "evopolicygym.evaluation.ray_executor",
    "RayEvaluator": "evopolicygym.evaluation.ray_executor",
    "ResourceLimits": "evopolicygym.evaluation.sandbox",
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

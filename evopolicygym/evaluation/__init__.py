"""Evaluation: one Program over a bounded list of Episodes, each in a fresh contained policy process.

The public names load lazily: the policy fork server and the runner processes start
from modules of this package (``forkserver``, ``runner``), and an eager import here
would have every one of them load the engine, the Benchmark contract and Ray's
executor before serving (tens of milliseconds at each evaluation's start, and pages
every policy process inherits).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evopolicygym.evaluation.config import (
        EpisodeSummary,
        EvaluationConfig,
        EvaluationError,
        EvaluationResult,
        PlannedEpisode,
        plan_episodes,
        require_failure_score,
    )
    from evopolicygym.evaluation.engine import Evaluator, evaluate
    from evopolicygym.evaluation.executors import EXECUTORS, make_evaluator
    from evopolicygym.evaluation.ray_executor import RAY_MISSING, RayEvaluator
    from evopolicygym.evaluation.sandbox import ResourceLimits

_EXPORTS = {
    "EpisodeSummary": "config",
    "EvaluationConfig": "config",
    "EvaluationError": "config",
    "EvaluationResult": "config",
    "PlannedEpisode": "config",
    "plan_episodes": "config",
    "require_failure_score": "config",
    "Evaluator": "engine",
    "evaluate": "engine",
    "EXECUTORS": "executors",
    "make_evaluator": "executors",
    "RAY_MISSING": "ray_executor",
    "RayEvaluator": "ray_executor",
    "ResourceLimits": "sandbox",
}

__all__ = [
    "EXECUTORS",
    "RAY_MISSING",
    "EpisodeSummary",
    "EvaluationConfig",
    "EvaluationError",
    "EvaluationResult",
    "Evaluator",
    "PlannedEpisode",
    "RayEvaluator",
    "ResourceLimits",
    "evaluate",
    "make_evaluator",
    "plan_episodes",
    "require_failure_score",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evopolicygym.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"evopolicygym.evaluation.{module}"), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value

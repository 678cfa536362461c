"""Evaluation: one Program over a bounded list of Episodes, each in a fresh contained policy process."""

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

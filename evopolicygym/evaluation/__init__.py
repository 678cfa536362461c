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
from evopolicygym.evaluation.sandbox import ResourceLimits

__all__ = [
    "EpisodeSummary",
    "EvaluationConfig",
    "EvaluationError",
    "EvaluationResult",
    "Evaluator",
    "PlannedEpisode",
    "ResourceLimits",
    "evaluate",
    "plan_episodes",
    "require_failure_score",
]

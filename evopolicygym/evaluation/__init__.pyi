# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.evaluation.config import EpisodeSummary as EpisodeSummary
from evopolicygym.evaluation.config import EvaluationConfig as EvaluationConfig
from evopolicygym.evaluation.config import EvaluationError as EvaluationError
from evopolicygym.evaluation.config import EvaluationResult as EvaluationResult
from evopolicygym.evaluation.config import PlannedEpisode as PlannedEpisode
from evopolicygym.evaluation.config import plan_episodes as plan_episodes
from evopolicygym.evaluation.config import require_failure_score as require_failure_score
from evopolicygym.evaluation.engine import Evaluator as Evaluator
from evopolicygym.evaluation.engine import evaluate as evaluate
from evopolicygym.evaluation.executors import EXECUTORS as EXECUTORS
from evopolicygym.evaluation.executors import make_evaluator as make_evaluator
from evopolicygym.evaluation.ray_executor import RAY_MISSING as RAY_MISSING
from evopolicygym.evaluation.ray_executor import RayEvaluator as RayEvaluator
from evopolicygym.evaluation.sandbox import ResourceLimits as ResourceLimits

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

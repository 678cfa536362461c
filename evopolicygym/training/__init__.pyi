# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.training.env import PolicyEvolutionEnv as PolicyEvolutionEnv
from evopolicygym.training.progress import TrainingProgress as TrainingProgress
from evopolicygym.training.reward import EPSILON as EPSILON
from evopolicygym.training.reward import NO_HANDOFF as NO_HANDOFF
from evopolicygym.training.reward import normalized_reward as normalized_reward
from evopolicygym.training.tasks import RowError as RowError

__all__ = [
    "EPSILON",
    "NO_HANDOFF",
    "PolicyEvolutionEnv",
    "RowError",
    "TrainingProgress",
    "normalized_reward",
]

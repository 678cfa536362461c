# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.benchmark import Benchmark as Benchmark
from evopolicygym.benchmark import BenchmarkSpec as BenchmarkSpec
from evopolicygym.benchmark import EpisodeSpec as EpisodeSpec
from evopolicygym.benchmark import Feedback as Feedback
from evopolicygym.benchmark import InvalidAction as InvalidAction
from evopolicygym.benchmark import check_benchmark as check_benchmark
from evopolicygym.evaluation import EvaluationConfig as EvaluationConfig
from evopolicygym.evaluation import EvaluationError as EvaluationError
from evopolicygym.evaluation import EvaluationResult as EvaluationResult
from evopolicygym.evaluation import Evaluator as Evaluator
from evopolicygym.evaluation import ResourceLimits as ResourceLimits
from evopolicygym.evaluation import evaluate as evaluate
from evopolicygym.policy import PolicyContext as PolicyContext
from evopolicygym.policy import TensorValue as TensorValue
from evopolicygym.program import Program as Program
from evopolicygym.program import ProgramError as ProgramError
from evopolicygym.registry import load_benchmark as load_benchmark
from evopolicygym.seeds import derive_seed as derive_seed
from evopolicygym.values import PolicyValueError as PolicyValueError

__version__: str
__all__ = [
    "Benchmark",
    "BenchmarkSpec",
    "EpisodeSpec",
    "EvaluationConfig",
    "EvaluationError",
    "EvaluationResult",
    "Evaluator",
    "Feedback",
    "InvalidAction",
    "PolicyContext",
    "PolicyValueError",
    "Program",
    "ProgramError",
    "ResourceLimits",
    "TensorValue",
    "__version__",
    "check_benchmark",
    "derive_seed",
    "evaluate",
    "load_benchmark",
]

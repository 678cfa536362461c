"""EvoPolicyGym: evolve executable policy programs under a fixed episode budget.

The public API is re-exported here lazily: a submitted policy that imports
``evopolicygym.policy`` must not pay for (or see) NumPy, msgspec or the engine.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Agent's CLI pays it)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "PolicyContext": "evopolicygym.policy",
    "TensorValue": "evopolicygym.policy",
    "Program": "evopolicygym.program",
    "ProgramError": "evopolicygym.program",
    "PolicyValueError": "evopolicygym.values",
    "Benchmark": "evopolicygym.benchmark",
    "BenchmarkSpec": "evopolicygym.benchmark",
    "EpisodeSpec": "evopolicygym.benchmark",
    "Feedback": "evopolicygym.benchmark",
    "InvalidAction": "evopolicygym.benchmark",
    "check_benchmark": "evopolicygym.benchmark",
    "EvaluationConfig": "evopolicygym.evaluation",
    "EvaluationError": "evopolicygym.evaluation",
    "EvaluationResult": "evopolicygym.evaluation",
    "Evaluator": "evopolicygym.evaluation",
    "ResourceLimits": "evopolicygym.evaluation",
    "evaluate": "evopolicygym.evaluation",
    "load_benchmark": "evopolicygym.registry",
    "derive_seed": "evopolicygym.seeds",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evopolicygym' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

"""EvoPolicyGym: evolve executable policy programs under a fixed episode budget.

The public API is re-exported here lazily: a submitted policy that imports
``evopolicygym.policy`` must not pay for (or see) NumPy, msgspec or the engine.

Every package's ``__init__.py`` is a face of this one shape: ``_EXPORTS`` maps each public
name to the module it is imported from, and ``__getattr__`` imports that module on the
name's first use. Beside it, ``__init__.pyi`` imports the same names, so type checkers see their
real types; ``python -m tests.support.faces`` writes it from the table, and
tests/test_package_faces.py checks the two agree.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
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
    "PolicyContext": "evopolicygym.policy",
    "TensorValue": "evopolicygym.policy",
    "Program": "evopolicygym.program",
    "ProgramError": "evopolicygym.program",
    "load_benchmark": "evopolicygym.registry",
    "derive_seed": "evopolicygym.seeds",
    "PolicyValueError": "evopolicygym.values",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


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

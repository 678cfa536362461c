"""The Benchmark authoring interface: everything a Benchmark author imports.

- The contract (``contract``): the ``Benchmark`` and ``Environment`` protocols and the
  values they trade (``BenchmarkSpec``, ``EpisodeSpec``, ``StepResult``,
  ``EpisodeRecord``, ``Feedback``, ``Artifact``), ``InvalidAction`` and
  ``BenchmarkError``.
- ``check_benchmark`` (``conformance``): the checks any Benchmark must pass.
- Helpers a Benchmark needs at the Policy boundary and for seeds: ``encode_value``,
  ``tensor_to_array``, ``PolicyValueError``, ``TensorValue``, ``derive_seed``.
- The Gymnasium adapter (``gymnasium_adapter``): ``GymnasiumBenchmark`` turns any
  Gymnasium environment into a Benchmark; families build their tasks on it. Loaded on
  first use, so the evaluation engine (which imports this package for the contract)
  never imports Gymnasium.

A family distribution (``evopolicygym_<family>``) imports this package and nothing
else of the project; it registers its factories under the ``evopolicygym.benchmarks``
entry-point group.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evopolicygym.benchmark.conformance import CheckResult, ConformanceReport, check_benchmark
from evopolicygym.benchmark.contract import (
    FAILURE_STATUSES,
    Artifact,
    Benchmark,
    BenchmarkError,
    BenchmarkSpec,
    Environment,
    EpisodeRecord,
    EpisodeSpec,
    Feedback,
    InvalidAction,
    Step,
    StepResult,
    canonical_digest,
)
from evopolicygym.policy import TensorValue
from evopolicygym.seeds import derive_seed
from evopolicygym.values import PolicyValueError, encode_value, tensor_to_array

if TYPE_CHECKING:
    from evopolicygym.benchmark.gymnasium_adapter import (
        GymnasiumBenchmark,
        GymnasiumEnvironment,
        describe_space,
        make_gymnasium_benchmark,
    )

_ADAPTER = "evopolicygym.benchmark.gymnasium_adapter"
_LAZY = {
    "GymnasiumBenchmark": _ADAPTER,
    "GymnasiumEnvironment": _ADAPTER,
    "describe_space": _ADAPTER,
    "make_gymnasium_benchmark": _ADAPTER,
}

__all__ = [
    "FAILURE_STATUSES",
    "Artifact",
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "CheckResult",
    "ConformanceReport",
    "Environment",
    "EpisodeRecord",
    "EpisodeSpec",
    "Feedback",
    "GymnasiumBenchmark",
    "GymnasiumEnvironment",
    "InvalidAction",
    "PolicyValueError",
    "Step",
    "StepResult",
    "TensorValue",
    "canonical_digest",
    "check_benchmark",
    "derive_seed",
    "describe_space",
    "encode_value",
    "make_gymnasium_benchmark",
    "tensor_to_array",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evopolicygym.benchmark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

"""The Benchmark authoring interface: everything a Benchmark author imports.

- The contract (``contract``): the ``Benchmark`` and ``Environment`` protocols and the
  values they trade (``BenchmarkSpec``, ``EpisodeSpec``, ``StepResult``,
  ``EpisodeRecord``, ``Feedback``, ``Artifact``), ``InvalidAction`` and
  ``BenchmarkError``.
- ``check_benchmark`` (``conformance``): the checks any Benchmark must pass.
- The catalog (``catalog``): ``CatalogEntry`` (a Benchmark's family, suites, aliases,
  difficulty profiles (``Profile``) and measured ``ReferenceScores``, declared as its ``catalog``
  attribute) and the static tables of every family's ids (``TASKS``), suites (``SUITES``,
  ``CORE16``) and ``FAMILIES``.
- Helpers a Benchmark needs at the Policy boundary and for seeds: ``encode_value``,
  ``tensor_to_array``, ``PolicyValueError``, ``TensorValue``, ``derive_seed``.
- The Gymnasium adapter (``gymnasium_adapter``): ``GymnasiumBenchmark`` turns any
  Gymnasium environment into a Benchmark; families build their tasks on it, adding domain
  Feedback with an ``EpisodeTracker`` (why an Episode ended, family fields) or just a
  termination classifier over its ``EpisodeEnd``. Loaded on
  first use, so the evaluation engine (which imports this package for the contract)
  never imports Gymnasium.

A family distribution (``evopolicygym_<family>``) imports this package and nothing
else of the project; it registers its factories under the ``evopolicygym.benchmarks``
entry-point group.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evopolicygym.benchmark.catalog import (
    CORE16,
    FAMILIES,
    RANDOM_POLICY_DIR,
    SUITES,
    TASKS,
    CatalogEntry,
    CatalogTask,
    Family,
    FirstStepOnly,
    Profile,
    ReferenceScores,
    SuiteMember,
    catalog_entry,
    family_installed,
    family_of_distribution,
    install_command,
    install_hint,
    pick_profile,
)
from evopolicygym.benchmark.conformance import CheckResult, ConformanceReport, check_benchmark
from evopolicygym.benchmark.contract import (
    FAILURE_STATUSES,
    SUMMARY_TERMINATION,
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
        EpisodeEnd,
        EpisodeTracker,
        GymnasiumBenchmark,
        GymnasiumEnvironment,
        default_termination,
        describe_space,
        domain_summary,
        make_gymnasium_benchmark,
        termination_of,
    )

_ADAPTER = "evopolicygym.benchmark.gymnasium_adapter"
_LAZY = {
    "EpisodeEnd": _ADAPTER,
    "EpisodeTracker": _ADAPTER,
    "GymnasiumBenchmark": _ADAPTER,
    "GymnasiumEnvironment": _ADAPTER,
    "default_termination": _ADAPTER,
    "describe_space": _ADAPTER,
    "domain_summary": _ADAPTER,
    "make_gymnasium_benchmark": _ADAPTER,
    "termination_of": _ADAPTER,
}

__all__ = [
    "CORE16",
    "FAILURE_STATUSES",
    "FAMILIES",
    "RANDOM_POLICY_DIR",
    "SUITES",
    "SUMMARY_TERMINATION",
    "TASKS",
    "Artifact",
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "CatalogEntry",
    "CatalogTask",
    "CheckResult",
    "ConformanceReport",
    "Environment",
    "EpisodeEnd",
    "EpisodeRecord",
    "EpisodeSpec",
    "EpisodeTracker",
    "Family",
    "Feedback",
    "FirstStepOnly",
    "GymnasiumBenchmark",
    "GymnasiumEnvironment",
    "InvalidAction",
    "PolicyValueError",
    "Profile",
    "ReferenceScores",
    "Step",
    "StepResult",
    "SuiteMember",
    "TensorValue",
    "canonical_digest",
    "catalog_entry",
    "check_benchmark",
    "default_termination",
    "derive_seed",
    "describe_space",
    "domain_summary",
    "encode_value",
    "family_installed",
    "family_of_distribution",
    "install_command",
    "install_hint",
    "make_gymnasium_benchmark",
    "pick_profile",
    "tensor_to_array",
    "termination_of",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evopolicygym.benchmark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

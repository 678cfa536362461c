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
  termination classifier over its ``EpisodeEnd``.

Each name loads its own module on first use, so the evaluation engine (which imports
this package for the contract) never imports Gymnasium.

A family distribution (``evopolicygym_<family>``) imports this package and nothing
else of the project; it registers its factories under the ``evopolicygym.benchmarks``
entry-point group.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CORE16": "evopolicygym.benchmark.catalog",
    "FAMILIES": "evopolicygym.benchmark.catalog",
    "FRONTIER": "evopolicygym.benchmark.catalog",
    "RANDOM_POLICY_DIR": "evopolicygym.benchmark.catalog",
    "SUITES": "evopolicygym.benchmark.catalog",
    "TASKS": "evopolicygym.benchmark.catalog",
    "CatalogEntry": "evopolicygym.benchmark.catalog",
    "CatalogTask": "evopolicygym.benchmark.catalog",
    "Family": "evopolicygym.benchmark.catalog",
    "FirstStepOnly": "evopolicygym.benchmark.catalog",
    "Profile": "evopolicygym.benchmark.catalog",
    "ReferenceScores": "evopolicygym.benchmark.catalog",
    "SuiteMember": "evopolicygym.benchmark.catalog",
    "catalog_entry": "evopolicygym.benchmark.catalog",
    "family_installed": "evopolicygym.benchmark.catalog",
    "family_of_distribution": "evopolicygym.benchmark.catalog",
    "install_command": "evopolicygym.benchmark.catalog",
    "install_hint": "evopolicygym.benchmark.catalog",
    "pick_profile": "evopolicygym.benchmark.catalog",
    "CheckResult": "evopolicygym.benchmark.conformance",
    "ConformanceReport": "evopolicygym.benchmark.conformance",
    "check_benchmark": "evopolicygym.benchmark.conformance",
    "FAILURE_STATUSES": "evopolicygym.benchmark.contract",
    "SUMMARY_TERMINATION": "evopolicygym.benchmark.contract",
    "Artifact": "evopolicygym.benchmark.contract",
    "Benchmark": "evopolicygym.benchmark.contract",
    "BenchmarkError": "evopolicygym.benchmark.contract",
    "BenchmarkSpec": "evopolicygym.benchmark.contract",
    "Environment": "evopolicygym.benchmark.contract",
    "EpisodeRecord": "evopolicygym.benchmark.contract",
    "EpisodeSpec": "evopolicygym.benchmark.contract",
    "Feedback": "evopolicygym.benchmark.contract",
    "InvalidAction": "evopolicygym.benchmark.contract",
    "Step": "evopolicygym.benchmark.contract",
    "StepResult": "evopolicygym.benchmark.contract",
    "canonical_digest": "evopolicygym.benchmark.contract",
    "GymnasiumBenchmark": "evopolicygym.benchmark.gymnasium_adapter.adapter",
    "make_gymnasium_benchmark": "evopolicygym.benchmark.gymnasium_adapter.adapter",
    "EpisodeEnd": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "EpisodeTracker": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "GymnasiumEnvironment": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "default_termination": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "domain_summary": "evopolicygym.benchmark.gymnasium_adapter.scoring",
    "termination_of": "evopolicygym.benchmark.gymnasium_adapter.scoring",
    "describe_space": "evopolicygym.benchmark.gymnasium_adapter.spaces",
    "VIDEO_KEY": "evopolicygym.benchmark.video",
    "FrameSampler": "evopolicygym.benchmark.video",
    "VideoOptions": "evopolicygym.benchmark.video",
    "encode_video": "evopolicygym.benchmark.video",
    "mp4_available": "evopolicygym.benchmark.video",
    "video_suffix": "evopolicygym.benchmark.video",
    "TensorValue": "evopolicygym.policy",
    "derive_seed": "evopolicygym.seeds",
    "PolicyValueError": "evopolicygym.values",
    "encode_value": "evopolicygym.values",
    "tensor_to_array": "evopolicygym.values",
}

__all__ = sorted(_EXPORTS)


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

"""Experiments: matrices of Runs (agents x Benchmarks x seeds x agent seeds) under one profile.

``spec`` parses a TOML spec and resolves it into the matrix an experiment's stream starts
with; ``decider`` holds the rules (which cell needs a new Run, which Run to carry on);
``runner`` applies them, carrying each Run in a process of its own through an
``Executor``: ``LocalExecutor`` on this machine, ``RayExecutor`` (``ray_executor``) on
the nodes of a Ray cluster. The experiment read API is ``records.experiments``.

Re-exported lazily, so reading a spec does not import the runner, nor anything Ray.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "OUTCOMES": "evopolicygym.experiments.decider",
    "RETRYABLE": "evopolicygym.experiments.decider",
    "next_step": "evopolicygym.experiments.decider",
    "RayExecutor": "evopolicygym.experiments.ray_executor",
    "RayUnavailable": "evopolicygym.experiments.ray_executor",
    "CellLauncher": "evopolicygym.experiments.runner",
    "Executor": "evopolicygym.experiments.runner",
    "ExperimentBusy": "evopolicygym.experiments.runner",
    "ExperimentMismatch": "evopolicygym.experiments.runner",
    "ExperimentOutcome": "evopolicygym.experiments.runner",
    "ExperimentRunner": "evopolicygym.experiments.runner",
    "LocalExecutor": "evopolicygym.experiments.runner",
    "default_carry_argv": "evopolicygym.experiments.runner",
    "MAX_CELLS": "evopolicygym.experiments.spec",
    "PROFILES": "evopolicygym.experiments.spec",
    "ExperimentSpec": "evopolicygym.experiments.spec",
    "SpecError": "evopolicygym.experiments.spec",
    "load_spec": "evopolicygym.experiments.spec",
    "resolve": "evopolicygym.experiments.spec",
    "spec_schema": "evopolicygym.experiments.spec",
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

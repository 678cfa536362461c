"""A Run as a live training environment (DESIGN §4.6).

``PolicyEvolutionEnv`` follows TRL's ``environment_factory`` contract; ``TrainingProgress``
hands it the trainer's step; ``normalized_reward`` is the reward's rule.

Re-exported lazily: ``import evopolicygym.training`` does not start the Host's machinery.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "PolicyEvolutionEnv": "evopolicygym.training.env",
    "TrainingProgress": "evopolicygym.training.progress",
    "EPSILON": "evopolicygym.training.reward",
    "NO_HANDOFF": "evopolicygym.training.reward",
    "normalized_reward": "evopolicygym.training.reward",
    "RowError": "evopolicygym.training.tasks",
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

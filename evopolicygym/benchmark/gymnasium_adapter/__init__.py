"""Any Gymnasium environment as a Benchmark.

``GymnasiumBenchmark`` stores only the environment id and its parameters, so it
pickles cheaply into evaluation workers; the Gymnasium spaces are built lazily
from one throwaway environment and cached per process. Actions are validated
against the Gymnasium action space and never clipped. ``make_gymnasium_benchmark``
is the entry point behind ids such as ``gymnasium:CartPole-v1``.

One concern per module:

- ``adapter``: ``GymnasiumBenchmark`` and ``make_gymnasium_benchmark``.
- ``environment``: ``GymnasiumEnvironment`` (one Episode) and the ``EpisodeTracker`` a
  family subclasses for its domain Feedback.
- ``spaces``: space descriptions (``describe_space``) and random actions;
  ``validation``: action validators compiled per space.
- ``params``: the entry point's parameters, read and checked; ``lookup``: finding an
  environment id, and install hints.
- ``known``: what is known of particular environments (meanings, worst returns).
- ``scoring``: the Feedback; ``traces``: its trace artifact.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "GymnasiumBenchmark": "evopolicygym.benchmark.gymnasium_adapter.adapter",
    "make_gymnasium_benchmark": "evopolicygym.benchmark.gymnasium_adapter.adapter",
    "EpisodeEnd": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "EpisodeTracker": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "GymnasiumEnvironment": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "default_termination": "evopolicygym.benchmark.gymnasium_adapter.environment",
    "domain_summary": "evopolicygym.benchmark.gymnasium_adapter.scoring",
    "termination_of": "evopolicygym.benchmark.gymnasium_adapter.scoring",
    "describe_space": "evopolicygym.benchmark.gymnasium_adapter.spaces",
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

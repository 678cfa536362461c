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

from evopolicygym.benchmark.gymnasium_adapter.adapter import (
    GymnasiumBenchmark,
    make_gymnasium_benchmark,
)
from evopolicygym.benchmark.gymnasium_adapter.environment import (
    EpisodeEnd,
    EpisodeTracker,
    GymnasiumEnvironment,
    default_termination,
)
from evopolicygym.benchmark.gymnasium_adapter.scoring import domain_summary, termination_of
from evopolicygym.benchmark.gymnasium_adapter.spaces import describe_space

__all__ = [
    "EpisodeEnd",
    "EpisodeTracker",
    "GymnasiumBenchmark",
    "GymnasiumEnvironment",
    "default_termination",
    "describe_space",
    "domain_summary",
    "make_gymnasium_benchmark",
    "termination_of",
]

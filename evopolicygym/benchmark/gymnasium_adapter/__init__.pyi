# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.benchmark.gymnasium_adapter.adapter import (
    GymnasiumBenchmark as GymnasiumBenchmark,
)
from evopolicygym.benchmark.gymnasium_adapter.adapter import (
    make_gymnasium_benchmark as make_gymnasium_benchmark,
)
from evopolicygym.benchmark.gymnasium_adapter.environment import EpisodeEnd as EpisodeEnd
from evopolicygym.benchmark.gymnasium_adapter.environment import EpisodeTracker as EpisodeTracker
from evopolicygym.benchmark.gymnasium_adapter.environment import (
    GymnasiumEnvironment as GymnasiumEnvironment,
)
from evopolicygym.benchmark.gymnasium_adapter.environment import (
    default_termination as default_termination,
)
from evopolicygym.benchmark.gymnasium_adapter.scoring import domain_summary as domain_summary
from evopolicygym.benchmark.gymnasium_adapter.scoring import termination_of as termination_of
from evopolicygym.benchmark.gymnasium_adapter.spaces import describe_space as describe_space

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

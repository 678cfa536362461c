"""Packaged Benchmarks: a Gymnasium adapter and curated Gymnasium tasks with baseline policies.

The ``evopolicygym.benchmarks`` entry points in pyproject.toml name the factories here.
"""

from benchmarks.curated import (
    FrozenLakeConfig,
    acrobot,
    cartpole,
    frozen_lake,
    lunar_lander,
    mountain_car_continuous,
)
from benchmarks.gymnasium_adapter import (
    GymnasiumBenchmark,
    GymnasiumEnvironment,
    describe_space,
    make_gymnasium_benchmark,
)

__all__ = [
    "FrozenLakeConfig",
    "GymnasiumBenchmark",
    "GymnasiumEnvironment",
    "acrobot",
    "cartpole",
    "describe_space",
    "frozen_lake",
    "lunar_lander",
    "make_gymnasium_benchmark",
    "mountain_car_continuous",
]

"""The classic family: Gymnasium's classic control and toy-text tasks as curated Benchmarks
(``cartpole``, ``frozen-lake``, ``acrobot``, ``mountain-car-continuous``), each with a
baseline program. Installed with ``evopolicygym`` itself: it needs only Gymnasium.
"""

from evopolicygym_classic.curated import (
    BASELINES_DIR,
    FrozenLakeConfig,
    acrobot,
    cartpole,
    frozen_lake,
    mountain_car_continuous,
)

__all__ = [
    "BASELINES_DIR",
    "FrozenLakeConfig",
    "acrobot",
    "cartpole",
    "frozen_lake",
    "mountain_car_continuous",
]

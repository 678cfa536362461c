"""The classic family: Gymnasium's classic control and toy-text tasks as curated Benchmarks
(``cartpole``, ``frozen-lake``, ``acrobot``, ``mountain-car-continuous``), each with a
baseline program; frozen-lake offers difficulty profiles (``--param profile=4x4-calm``,
``8x8-calm``, ``4x4``, ``8x8``). Installed with ``evopolicygym`` itself: it needs only
Gymnasium.
"""

from evopolicygym_classic.tasks import (
    BASELINES_DIR,
    FROZEN_LAKE_PROFILES,
    FrozenLakeConfig,
    acrobot,
    cartpole,
    frozen_lake,
    mountain_car_continuous,
)

__all__ = [
    "BASELINES_DIR",
    "FROZEN_LAKE_PROFILES",
    "FrozenLakeConfig",
    "acrobot",
    "cartpole",
    "frozen_lake",
    "mountain_car_continuous",
]

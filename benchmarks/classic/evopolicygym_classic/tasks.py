"""The classic control and toy-text tasks, curated: scoring floors, success thresholds and
baseline programs.

Each factory is an ``evopolicygym.benchmarks`` entry point (this distribution's
pyproject.toml names them). Failed Episodes (exception, timeout, invalid action, ...)
score ``failure_return``, a floor at or below the worst return an Episode can reach, so
failing never pays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

from evopolicygym.benchmark import (
    BenchmarkError,
    CatalogEntry,
    EpisodeEnd,
    GymnasiumBenchmark,
    Profile,
    ReferenceScores,
    pick_profile,
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

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"

# The fixed FrozenLake maps, published in the spec so policies can plan on them.
FROZEN_LAKE_MAPS: dict[str, list[str]] = {
    "4x4": ["SFFF", "FHFH", "FFFH", "HFFG"],
    "8x8": [
        "SFFFFFFF",
        "FFFFFFFF",
        "FFFHFFFF",
        "FFFFFHFF",
        "FFFHFFFF",
        "FHHFFFHF",
        "FHFFHFHF",
        "FFFHFFFG",
    ],
}


# Measured with evaluate() on the assessment split, seed 0, 32 Episodes: the baseline
# program against a uniform-random policy (evopolicy benchmarks check --suite core16
# measures them again).
ACROBOT_REFERENCE = ReferenceScores(
    baseline=-89.656, random=-492.438, split="assessment", seed=0, episodes=32
)
CONTINUOUS_CAR_REFERENCE = ReferenceScores(
    baseline=89.319, random=-33.546, split="assessment", seed=0, episodes=32
)


def _baseline(benchmark_id: str) -> str:
    return str(BASELINES_DIR / benchmark_id)


# Why an Episode ended, from its last step (the step limit is ``truncated`` in all of them).
def _fell(end: EpisodeEnd) -> str:
    return "truncated" if end.truncated else "fell" if end.terminated else "stopped"


def _reached_goal(end: EpisodeEnd) -> str:
    return "truncated" if end.truncated else "reached_goal" if end.terminated else "stopped"


def _goal_or_hole(end: EpisodeEnd) -> str:
    if end.terminated:
        return "reached_goal" if end.reward > 0 else "fell"  # into a hole
    return "truncated" if end.truncated else "stopped"


def cartpole() -> GymnasiumBenchmark:
    return GymnasiumBenchmark(
        "CartPole-v1",
        benchmark_id="cartpole",
        description="Balance a pole on a cart by pushing it left or right, for up to 500 steps.",
        failure_return=0.0,
        success_threshold=475.0,
        baseline=_baseline("cartpole"),
        catalog=CatalogEntry(family="classic"),
        termination=_fell,
    )


class FrozenLakeConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    map: Literal["4x4", "8x8"] = "4x4"
    slippery: bool = True


def _lake(name: str, difficulty: int, map: str, slippery: bool, text: str) -> Profile:
    return Profile(
        name=name,
        difficulty=difficulty,
        parameters={"map_name": map, "is_slippery": slippery},
        description=text,
    )


# Calm ice is a shortest-path puzzle at either size; slippery ice makes every plan a gamble.
FROZEN_LAKE_PROFILES = (
    _lake("4x4-calm", 0, "4x4", False, "the 4x4 lake, moves go where they are meant to"),
    _lake("8x8-calm", 1, "8x8", False, "the 8x8 lake, moves go where they are meant to"),
    _lake("4x4", 2, "4x4", True, "the 4x4 lake on slippery ice"),
    _lake("8x8", 3, "8x8", True, "the 8x8 lake on slippery ice"),
)


def frozen_lake(
    map: str | None = None, slippery: bool | str | None = None, profile: str | None = None
) -> GymnasiumBenchmark:
    """FrozenLake-v1, by ``map`` and ``slippery`` or by ``profile`` (which names both);
    ``slippery`` also accepts the strings ``"true"``/``"false"`` from the CLI."""
    if profile is not None:
        if map is not None or slippery is not None:
            raise ValueError("frozen-lake: give a profile or map/slippery, not both")
        try:
            chosen = pick_profile("frozen-lake", FROZEN_LAKE_PROFILES, profile)
        except BenchmarkError as exc:
            raise ValueError(str(exc)) from exc
        map, slippery = chosen.parameters["map_name"], chosen.parameters["is_slippery"]
    given = {k: v for k, v in (("map", map), ("slippery", slippery)) if v is not None}
    try:
        config = msgspec.convert(given, FrozenLakeConfig, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(
            f"frozen-lake: invalid config ({exc}); map is '4x4' or '8x8', slippery is true or false"
        ) from exc
    named = next(
        p.name
        for p in FROZEN_LAKE_PROFILES
        if p.parameters == {"map_name": config.map, "is_slippery": config.slippery}
    )
    return GymnasiumBenchmark(
        "FrozenLake-v1",
        benchmark_id="frozen-lake",
        description=(
            f"Walk from S to the goal G across the {config.map} frozen lake without falling "
            f"into a hole H{'; the ice is slippery' if config.slippery else ''}."
        ),
        make_kwargs={"map_name": config.map, "is_slippery": config.slippery},
        # Gymnasium registers 100 steps for 4x4 and 200 for its 8x8 variant.
        max_episode_steps=100 if config.map == "4x4" else 200,
        failure_return=0.0,
        success_threshold=1.0,
        metadata={"map": FROZEN_LAKE_MAPS[config.map]},
        baseline=_baseline("frozen-lake"),
        catalog=CatalogEntry(family="classic", profiles=FROZEN_LAKE_PROFILES, profile=named),
        termination=_goal_or_hole,
    )


def acrobot() -> GymnasiumBenchmark:
    return GymnasiumBenchmark(
        "Acrobot-v1",
        benchmark_id="acrobot",
        description="Swing the two-link Acrobot's tip above the target height as fast as possible.",
        failure_return=-500.0,
        success_threshold=-100.0,
        baseline=_baseline("acrobot"),
        catalog=CatalogEntry(family="classic", suites=("core16",), reference=ACROBOT_REFERENCE),
        termination=_reached_goal,
    )


def mountain_car_continuous() -> GymnasiumBenchmark:
    """Also registered as ``continuouscar`` (its Core16 name): the same Benchmark, id and
    Episodes, so Runs under either name compare."""
    return GymnasiumBenchmark(
        "MountainCarContinuous-v0",
        benchmark_id="mountain-car-continuous",
        description=(
            "Drive an underpowered car up the right hill to the flag, spending little force."
        ),
        failure_return=-100.0,
        success_threshold=90.0,
        baseline=_baseline("mountain-car-continuous"),
        catalog=CatalogEntry(
            family="classic",
            suites=("core16",),
            aliases=("continuouscar",),
            reference=CONTINUOUS_CAR_REFERENCE,
        ),
        termination=_reached_goal,
    )

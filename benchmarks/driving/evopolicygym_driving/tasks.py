"""highway-env's parking and roundabout tasks of Core16, with difficulty profiles, domain
Feedback and baseline programs.

Nothing is rendered: the environments are made without a render mode, so highway-env
never opens a window (it imports pygame, which stays idle). Every Episode is reset with
its seed, which seeds highway-env's own generator: where the car starts, the goal spot,
the parked cars, the other vehicles' spawning, routes and driving styles all come from
it, so the same Episode replays identically (checked by the tests).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import highway_env

from evopolicygym.benchmark import (
    CatalogEntry,
    EpisodeEnd,
    EpisodeTracker,
    GymnasiumBenchmark,
    Profile,
    ReferenceScores,
    StepResult,
    pick_profile,
)

__all__ = ["BASELINES_DIR", "PROFILES", "DrivingTracker", "parking", "roundabout"]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"

gymnasium.register_envs(highway_env)
# highway-env marks roundabout-v0 out of date (v1 has configurable traffic); Core16 names v0.
warnings.filterwarnings(
    "ignore", message=".*roundabout-v0 is out of date", category=DeprecationWarning
)

PROFILES: dict[str, tuple[Profile, ...]] = {
    "parking": (
        Profile(
            name="empty",
            difficulty=0,
            parameters={"vehicles_count": 0},
            description="an empty lot, 100 s (500 decisions) to park",
        ),
        Profile(
            name="parked",
            difficulty=1,
            parameters={"vehicles_count": 10},
            description="ten parked cars in other spots, 100 s to park",
        ),
        Profile(
            name="hurried",
            difficulty=2,
            parameters={"vehicles_count": 10, "duration": 20},
            description="ten parked cars, 20 s (100 decisions) to park",
        ),
    ),
    "roundabout": (
        Profile(
            name="short",
            difficulty=0,
            parameters={"duration": 11},
            description="11 s (11 decisions) through the roundabout",
        ),
        Profile(
            name="long",
            difficulty=1,
            parameters={"duration": 30},
            description="30 s (30 decisions): the car goes round and meets more of the traffic",
        ),
    ),
}
DEFAULT_PROFILES = {"parking": "empty", "roundabout": "short"}
# highway-env's own defaults, with which the profiles' configs are completed.
DEFAULT_CONFIG = {
    "parking": {"vehicles_count": 0, "duration": 100},
    "roundabout": {"duration": 11},
}
POLICY_FREQUENCY = {"parking": 5, "roundabout": 1}  # decisions per simulated second

OBSERVATION = {
    "parking": {
        "observation": (
            "{observation, achieved_goal, desired_goal: each 6 float64 "
            "(x, y, vx, vy, cos h, sin h) of the car (observation, achieved_goal) and of the goal "
            "spot (desired_goal); positions in units of 100 m, speeds of 5 m/s, h the heading "
            "(0 = +x). The lot is 70 m x 42 m around (0, 0), walled; spots line both long sides, "
            "opening onto the aisle at y = 0}"
        ),
        "action": (
            "[acceleration, steering], each in [-1, 1]: acceleration x 5 m/s^2, "
            "steering x 45 degrees (positive turns left)"
        ),
        "reward": (
            "each step -sqrt(|dx| + 0.3|dy| + 0.02|d cos h| + 0.02|d sin h|) between car and goal "
            "(normalised units), -5 on a collision; parked when that root is under 0.12"
        ),
    },
    "roundabout": {
        "observation": (
            "5 x 5 float32: one row per vehicle, the car first then the nearest four, each "
            "(presence, x, y, vx, vy) in absolute coordinates, positions / 100 m "
            "and speeds / 15 m/s"
        ),
        "action": (
            "0 change lane left, 1 keep going, 2 change lane right, 3 faster, 4 slower "
            "(target speeds 0, 8, 16 m/s)"
        ),
        "reward": (
            "each second in [0, 1]: 0 on a collision, more the faster the car goes, "
            "a little less for a lane change; 0 off the road"
        ),
    },
}
DESCRIPTIONS = {
    "parking": (
        "Park the car in the goal spot of a parking lot, steering and accelerating continuously."
    ),
    "roundabout": (
        "Drive through a busy roundabout without colliding, as fast as is safe, "
        "with discrete meta-actions."
    ),
}
# Measured on the default profile with ``evopolicy benchmarks check ID --baseline --episodes 16``
# (evaluate(): the assessment split, seed 0, 16 Episodes; highway-env runs 10 to 30
# decisions a second here), the baseline program against the kernel's uniform-random one.
# Parking: the baseline parked in all 16 (within 1.8 m of the spot's centre on average), random
# collided with a wall in all 16; each step costs the distance left, so a quick crash can cost
# less than a slow parking. Roundabout: the baseline collided in none, random in 4.
REFERENCES = {
    "parking": ReferenceScores(
        baseline=-9.1406, random=-40.3016, split="assessment", seed=0, episodes=16
    ),
    "roundabout": ReferenceScores(
        baseline=10.0573, random=8.6562, split="assessment", seed=0, episodes=16
    ),
}


class _PlainDict(gymnasium.ObservationWrapper[Any, Any, Any]):
    """highway-env's goal observations are OrderedDicts; the Episode's values are plain dicts."""

    def observation(self, observation: Any) -> Any:
        return dict(observation) if isinstance(observation, dict) else observation


def _plain_dicts(env: gymnasium.Env[Any, Any]) -> gymnasium.Env[Any, Any]:
    return _PlainDict(env)


class DrivingTracker(EpisodeTracker):
    """Collided or not, the car's mean speed (m/s, signed: reversing counts negative)
    over the Episode's decisions, and for parking whether it parked and its final
    distance to the goal spot (m)."""

    def __init__(self) -> None:
        self.speeds: list[float] = []

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        self.speeds.append(float(info.get("speed", 0.0)))

    def termination(self, end: EpisodeEnd) -> str:
        if end.info.get("crashed"):
            return "collided"
        if end.info.get("is_success"):
            return "parked"
        if end.truncated:
            return "truncated"
        return "terminated" if end.terminated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        vehicle = getattr(env.unwrapped, "vehicle", None)
        if vehicle is None:  # never reset
            return {}
        fields: dict[str, Any] = {
            "collided": bool(vehicle.crashed),
            "mean_speed": sum(self.speeds) / len(self.speeds) if self.speeds else None,
        }
        goal = getattr(vehicle, "goal", None)
        if goal is not None:
            fields["parked"] = bool(end.info.get("is_success", False))
            dx, dy = (float(a - b) for a, b in zip(vehicle.position, goal.position, strict=True))
            fields["distance_to_goal"] = round(math.hypot(dx, dy), 3)
        else:
            fields["on_road"] = bool(vehicle.on_road)
        return fields


def _task(benchmark_id: str, env_id: str, profile: str | None) -> GymnasiumBenchmark:
    profiles = PROFILES[benchmark_id]
    chosen = pick_profile(
        benchmark_id, profiles, DEFAULT_PROFILES[benchmark_id] if profile is None else profile
    )
    config = {**DEFAULT_CONFIG[benchmark_id], **chosen.parameters}
    steps = int(config["duration"]) * POLICY_FREQUENCY[benchmark_id]
    # Below any return: a parking step costs at most about 1 (the walls bound the distance)
    # and a collision 5; a roundabout step pays at least -0.05 (a lane change while colliding).
    failure = -float(steps) - 10.0 if benchmark_id == "parking" else -0.05 * steps - 1.0
    is_default = chosen.name == DEFAULT_PROFILES[benchmark_id]
    return GymnasiumBenchmark(
        env_id,
        benchmark_id=benchmark_id,
        description=DESCRIPTIONS[benchmark_id] + f" Profile {chosen.name}: {chosen.description}.",
        # highway-env takes its settings as one config dict; no render_mode: nothing drawn.
        make_kwargs={"config": config},
        max_episode_steps=steps,
        failure_return=failure,
        metadata={**OBSERVATION[benchmark_id], "env_id": env_id},
        baseline=str(BASELINES_DIR / benchmark_id),
        catalog=CatalogEntry(
            family="driving",
            suites=("core16",) if is_default else (),
            profiles=profiles,
            profile=chosen.name,
            reference=REFERENCES[benchmark_id] if is_default else None,
        ),
        tracker=DrivingTracker,
        wrap=_plain_dicts if benchmark_id == "parking" else None,
    )


def parking(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("parking", "parking-v0", profile)


def roundabout(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("roundabout", "roundabout-v0", profile)

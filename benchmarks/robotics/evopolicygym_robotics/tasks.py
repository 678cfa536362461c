"""gymnasium-robotics' Fetch arm tasks of Core16 (push, pick-and-place), with step-limit
profiles, domain Feedback and scripted baseline programs. Nothing is rendered (no render
mode: MuJoCo only simulates)."""

from __future__ import annotations

import math
import os

# Before mujoco is imported: video frames render headless through EGL (no display here).
os.environ.setdefault("MUJOCO_GL", "egl")
from pathlib import Path
from typing import Any

import gymnasium
import gymnasium_robotics
import mujoco
from gymnasium_robotics.utils import mujoco_utils

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

__all__ = ["BASELINES_DIR", "PROFILES", "FetchTracker", "fetch_pickandplace", "fetch_push"]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"


class _JointTypes:
    """MuJoCo's joint types as plain ints."""

    mjJNT_FREE = int(mujoco.mjtJoint.mjJNT_FREE)
    mjJNT_BALL = int(mujoco.mjtJoint.mjJNT_BALL)
    mjJNT_SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)
    mjJNT_HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)


class _MujocoWithIntJointTypes:
    """gymnasium-robotics 1.4.2 checks `model.jnt_type[j] in (mjtJoint.mjJNT_HINGE, ...)`,
    which is false under NumPy 2.4 (a numpy int32 against MuJoCo's enum), so every Fetch
    environment fails its setup with an AssertionError. Its joint helpers see this
    stand-in for the mujoco module, the same but with int joint types."""

    mjtJoint = _JointTypes

    def __getattr__(self, name: str) -> Any:
        return getattr(mujoco, name)


if mujoco_utils.mujoco is mujoco:
    mujoco_utils.mujoco = _MujocoWithIntJointTypes()
gymnasium.register_envs(gymnasium_robotics)

PROFILES: dict[str, tuple[Profile, ...]] = {
    name: (
        Profile(
            name="long", difficulty=0, parameters={"max_steps": 100}, description="100 steps (4 s)"
        ),
        Profile(
            name="standard",
            difficulty=1,
            parameters={"max_steps": 50},
            description="50 steps (2 s), as registered",
        ),
    )
    for name in ("fetch_push", "fetch_pickandplace")
}
DEFAULT_PROFILE = "standard"
OBSERVATION = {
    "observation": (
        "{observation: 25 float64 - gripper position (0:3, m), block position (3:6), "
        "block minus gripper (6:9), finger openings (9:11), block rotation (11:14, Euler), "
        "block linear and angular velocity relative to the gripper (14:20, per step), "
        "gripper velocity (20:23), finger velocities (23:25); "
        "achieved_goal: the block's position (3); desired_goal: where it should be (3)}"
    ),
    "action": (
        "4 floats in [-1, 1]: gripper displacement x, y, z (x 5 cm) and fingers (+1 open, -1 close)"
    ),
    "reward": "-1 each step the block is more than 5 cm from the goal, else 0",
}
DESCRIPTIONS = {
    "fetch_push": (
        "Push the block on the table to the goal position with the Fetch arm's closed gripper."
    ),
    "fetch_pickandplace": (
        "Pick the block up with the Fetch arm and place it at the goal, often in the air."
    ),
}
# Measured on the standard profile with ``evopolicy benchmarks check ID --baseline --episodes 32``
# (evaluate(): assessment split, seed 0, 32 Episodes), the baseline against the kernel's
# uniform-random program. The baselines end all 32 Episodes at the goal (push within 2.2 cm
# on average, pick-and-place 0.7 cm); random reaches it in none (push) and 1 of 32.
REFERENCES = {
    "fetch_push": ReferenceScores(
        baseline=-23.75, random=-50.0, split="assessment", seed=0, episodes=32
    ),
    "fetch_pickandplace": ReferenceScores(
        baseline=-21.8438, random=-48.4375, split="assessment", seed=0, episodes=32
    ),
}


class FetchTracker(EpisodeTracker):
    """Success (the block within 5 cm of the goal at the end), the final block-to-goal
    distance (m) and whether the block moved at all (more than 1 cm)."""

    def __init__(self) -> None:
        self.start: list[float] | None = None

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        self.start = [float(v) for v in observation["achieved_goal"]]

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        pass

    def termination(self, end: EpisodeEnd) -> str:
        if end.info.get("is_success"):
            return "reached_goal"
        return "truncated" if end.truncated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        if end.observation is None or self.start is None:
            return {"success": False, "final_distance": None, "object_moved": False}
        block = [float(v) for v in end.observation["achieved_goal"]]
        goal = [float(v) for v in end.observation["desired_goal"]]
        return {
            "success": bool(end.info.get("is_success", False)),
            "final_distance": round(math.dist(block, goal), 4),
            "object_moved": math.dist(block, self.start) > 0.01,
        }


def _task(benchmark_id: str, env_id: str, profile: str | None) -> GymnasiumBenchmark:
    profiles = PROFILES[benchmark_id]
    chosen = pick_profile(benchmark_id, profiles, DEFAULT_PROFILE if profile is None else profile)
    steps = int(chosen.parameters["max_steps"])
    is_default = chosen.name == DEFAULT_PROFILE
    return GymnasiumBenchmark(
        env_id,
        benchmark_id=benchmark_id,
        description=DESCRIPTIONS[benchmark_id] + f" Profile {chosen.name}: {chosen.description}.",
        max_episode_steps=steps,
        # Rewards are -1 or 0 a step: a failed Episode scores below every return.
        failure_return=-float(steps) - 1.0,
        metadata={**OBSERVATION, "env_id": env_id},
        parameters={"max_steps": steps},
        baseline=str(BASELINES_DIR / benchmark_id),
        catalog=CatalogEntry(
            family="robotics",
            suites=("core16",) if is_default else (),
            profiles=profiles,
            profile=chosen.name,
            reference=REFERENCES[benchmark_id] if is_default else None,
        ),
        tracker=FetchTracker,
    )


def fetch_push(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("fetch_push", "FetchPush-v4", profile)


def fetch_pickandplace(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("fetch_pickandplace", "FetchPickAndPlace-v4", profile)

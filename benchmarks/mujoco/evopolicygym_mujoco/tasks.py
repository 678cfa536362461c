"""The MuJoCo tasks of Core16 (Gymnasium's v5 environments), each with difficulty profiles,
domain Feedback and a baseline program.

Observations and actions are Gymnasium's own (a float64 vector; torques in a box). Nothing is
rendered but Episode videos, drawn off-screen through EGL unless ``MUJOCO_GL`` says otherwise.
MuJoCo is deterministic for one seed on one machine: an Episode replays to the same trace.
"""

from __future__ import annotations

import logging
import os

# Before mujoco is imported: video frames render headless (no display here, nor in CI).
os.environ.setdefault("MUJOCO_GL", "egl")
from pathlib import Path
from typing import Any

import gymnasium
import mujoco
import numpy as np

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

__all__ = [
    "BASELINES_DIR",
    "PROFILES",
    "REACHED_DISTANCE",
    "LocomotionTracker",
    "PusherTracker",
    "ReacherTracker",
    "ant",
    "halfcheetah",
    "pusher",
    "reacher",
]

_log = logging.getLogger(__name__)


def _warn(message: str) -> None:
    # HalfCheetah's model uses a compiler attribute newer MuJoCo releases call deprecated: not
    # news to a user.
    level = logging.DEBUG if "'settotalmass' is deprecated" in message else logging.WARNING
    _log.log(level, "MuJoCo: %s", message)


# MuJoCo's default warning handler appends to MUJOCO_LOG.TXT in the working directory (and
# prints to stderr): HalfCheetah's model sets a deprecated compiler attribute, so every Episode
# would leave that file wherever a Run is started. Its warnings go to logging instead,
# unless the process already has a handler of its own.
if mujoco.get_mju_user_warning() is None:
    mujoco.set_mju_user_warning(_warn)

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"
# The fingertip counts as on the target within 2 cm (the target's radius is about 1 cm).
REACHED_DISTANCE = 0.02


def _distance(env: gymnasium.Env[Any, Any], a: str, b: str) -> float:
    base = env.unwrapped
    gap = base.get_body_com(a)[:2] - base.get_body_com(b)[:2]  # type: ignore[attr-defined]
    return float(np.linalg.norm(gap))


class ReacherTracker(EpisodeTracker):
    """The fingertip's final distance to the target, and whether it ended on it."""

    def __init__(self) -> None:
        self.distance: float | None = None

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        self.distance = _distance(env, "fingertip", "target")

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        self.distance = _distance(env, "fingertip", "target")

    def termination(self, end: EpisodeEnd) -> str:
        if not end.truncated:
            return "stopped"
        reached = self.distance is not None and self.distance < REACHED_DISTANCE
        return "reached_goal" if reached else "truncated"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        distance = _distance(env, "fingertip", "target")
        return {"final_distance": round(distance, 6), "reached": distance < REACHED_DISTANCE}


class LocomotionTracker(EpisodeTracker):
    """Forward distance travelled (along x, from the start), mean forward velocity, and for a
    body that can fall (Ant), whether it did: Gymnasium ends the Episode when its torso
    leaves the healthy height range."""

    can_fall = False

    def __init__(self) -> None:
        self.start = 0.0
        self.dt = 0.0

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        base = env.unwrapped
        self.start = float(base.data.qpos[0])  # type: ignore[attr-defined]
        self.dt = float(base.dt)  # type: ignore[attr-defined]

    def termination(self, end: EpisodeEnd) -> str:
        if end.terminated:
            return "fell"
        return "truncated" if end.truncated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        distance = float(env.unwrapped.data.qpos[0]) - self.start  # type: ignore[attr-defined]
        fields: dict[str, Any] = {
            "distance": round(distance, 6),
            "forward_velocity": round(distance / (end.steps * self.dt), 6) if end.steps else 0.0,
        }
        if self.can_fall:
            fields["fell"] = bool(end.terminated)
        return fields


class AntTracker(LocomotionTracker):
    can_fall = True


class PusherTracker(EpisodeTracker):
    """The object's final distance to the goal (and where it started), the arm's tip's final
    distance to the object."""

    def __init__(self) -> None:
        self.initial = 0.0

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        self.initial = _distance(env, "object", "goal")

    def termination(self, end: EpisodeEnd) -> str:
        return "truncated" if end.truncated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        final = _distance(env, "object", "goal")
        return {
            "final_distance": round(final, 6),
            "initial_distance": round(self.initial, 6),
            "closer": final < self.initial - 0.01,
            "tip_to_object": round(_distance(env, "tips_arm", "object"), 6),
        }


# Each task's profiles, easiest first; the default is Core16's environment as Gymnasium makes it.
PROFILES: dict[str, tuple[Profile, ...]] = {
    "reacher5": (
        Profile(
            name="long",
            difficulty=0,
            parameters={"max_episode_steps": 100},
            description="100 steps to reach the target",
        ),
        Profile(
            name="standard",
            difficulty=1,
            parameters={"max_episode_steps": 50},
            description="50 steps, as Gymnasium has it",
        ),
    ),
    "pusher5": (
        Profile(
            name="long",
            difficulty=0,
            parameters={"max_episode_steps": 200},
            description="200 steps to push the object",
        ),
        Profile(
            name="standard",
            difficulty=1,
            parameters={"max_episode_steps": 100},
            description="100 steps, as Gymnasium has it",
        ),
    ),
    **{
        name: (
            Profile(
                name="calm",
                difficulty=0,
                parameters={"reset_noise_scale": 0.0},
                description="starts at rest in the same pose",
            ),
            Profile(
                name="standard",
                difficulty=1,
                parameters={"reset_noise_scale": 0.1},
                description="Gymnasium's start noise (0.1)",
            ),
            Profile(
                name="noisy",
                difficulty=2,
                parameters={"reset_noise_scale": 0.3},
                description="three times Gymnasium's start noise",
            ),
        )
        for name in ("halfcheetah5", "ant5")
    },
}
DEFAULT_PROFILE = "standard"
ENVIRONMENTS = {
    "reacher5": "Reacher-v5",
    "halfcheetah5": "HalfCheetah-v5",
    "ant5": "Ant-v5",
    "pusher5": "Pusher-v5",
}
STEPS = {"reacher5": 50, "halfcheetah5": 1000, "ant5": 1000, "pusher5": 100}
BASELINES = {
    "reacher5": "reacher",
    "halfcheetah5": "halfcheetah",
    "ant5": "ant",
    "pusher5": "pusher",
}
DESCRIPTIONS = {
    "reacher5": "Move a two-joint arm's fingertip onto a random target in the plane.",
    "halfcheetah5": "Make a planar two-legged cheetah run forward as fast as it can.",
    "ant5": "Make a four-legged ant walk forward without falling over.",
    "pusher5": "Push a cylinder on a table to a goal with a seven-joint arm.",
}
OBSERVATION = {
    "reacher5": {
        "observation": "[cos q1, cos q2, sin q1, sin q2, target x, target y, dq1, dq2, "
        "fingertip x - target x, fingertip y - target y] (links 0.1 and 0.11 long)",
        "action": "[torque 1, torque 2] in [-1, 1]",
        "reward": "-(fingertip to target distance) - sum(action^2) per step",
    },
    "halfcheetah5": {
        "observation": "[rootz, rooty (pitch), bthigh, bshin, bfoot, fthigh, fshin, ffoot] "
        "joint positions, then the 9 velocities [vx, vz, pitch rate, the six joints'] "
        "(x is left out)",
        "action": "torques of [bthigh, bshin, bfoot, fthigh, fshin, ffoot] in [-1, 1]",
        "reward": "forward velocity - 0.1 * sum(action^2) per step",
    },
    "ant5": {
        "observation": "torso z, torso orientation (quaternion w x y z), 8 hip and ankle angles, "
        "torso velocity (6), 8 joint velocities, then 78 clipped external contact forces "
        "(x, y left out)",
        "action": "torques of [hip 4, ankle 4, hip 1, ankle 1, hip 2, ankle 2, hip 3, ankle 3] "
        "in [-1, 1]",
        "reward": "1 per healthy step + forward velocity - 0.5 * sum(action^2) - contact cost; "
        "the Episode ends when the torso leaves heights 0.2..1.0",
    },
    "pusher5": {
        "observation": "7 joint angles, 7 joint velocities, then the arm's tip, the object "
        "and the goal as (x, y, z) each",
        "action": "torques of the 7 arm joints in [-2, 2]",
        "reward": "-(object to goal) - 0.5 * (tip to object) - 0.1 * sum(action^2) per step",
    },
}
# The least a step can pay, so that step limit x it is below any completed Episode's return
# (the failure score). Velocities have no hard bound: 30 m/s is far beyond what these bodies
# reach (HalfCheetah's best learned gaits run about 15 m/s).
WORST_STEP = {
    "reacher5": -(0.21 + 0.2 + 2.0),  # arm reach + target radius, two unit torques squared
    "halfcheetah5": -(30.0 + 0.1 * 6),
    "ant5": -(30.0 + 0.5 * 8 + 0.0005 * 78),
    "pusher5": -(2.0 + 0.5 * 2.0 + 0.1 * 7 * 4),  # the table's span for either distance
}
# Measured on the default profile with evaluate(): the assessment split, seed 0, 32 Episodes,
# the baseline against the kernel's uniform-random program (`evopolicy benchmarks check ID
# --baseline --episodes 32`; `benchmarks check --suite core16` measures both on fewer).
REFERENCES: dict[str, ReferenceScores] = {
    name: ReferenceScores(baseline=ours, random=random, split="assessment", seed=0, episodes=32)
    for name, ours, random in (
        # Final distance 0.073 against random's 0.171; 7 of 32 end within 2 cm.
        ("reacher5", -6.864, -42.5531),
        # 64.7 m at 1.29 m/s on average; random goes 4 m backwards.
        ("halfcheetah5", 1182.4874, -278.6689),
        # The stance never falls; random falls in 26 of 32 Episodes.
        ("ant5", 993.7248, -81.4904),
        # Random pays for its torques (0.1 * 7 * 4/3 a step) and flails away from the object.
        ("pusher5", -49.1468, -151.6561),
    )
}


def _task(benchmark_id: str, profile: str | None) -> GymnasiumBenchmark:
    profiles = PROFILES[benchmark_id]
    chosen = pick_profile(benchmark_id, profiles, DEFAULT_PROFILE if profile is None else profile)
    make_kwargs = dict(chosen.parameters)
    steps = int(make_kwargs.pop("max_episode_steps", STEPS[benchmark_id]))
    env_id = ENVIRONMENTS[benchmark_id]
    tracker = {
        "reacher5": ReacherTracker,
        "halfcheetah5": LocomotionTracker,
        "ant5": AntTracker,
        "pusher5": PusherTracker,
    }[benchmark_id]
    is_default = chosen.name == DEFAULT_PROFILE
    return GymnasiumBenchmark(
        env_id,
        benchmark_id=benchmark_id,
        description=DESCRIPTIONS[benchmark_id] + f" Profile {chosen.name}: {chosen.description}.",
        make_kwargs=make_kwargs,
        max_episode_steps=steps,
        failure_return=round(WORST_STEP[benchmark_id] * steps, 3),
        metadata=dict(OBSERVATION[benchmark_id]),
        baseline=str(BASELINES_DIR / BASELINES[benchmark_id]),
        catalog=CatalogEntry(
            family="mujoco",
            suites=("core16",) if is_default else (),
            profiles=profiles,
            profile=chosen.name,
            reference=REFERENCES.get(benchmark_id) if is_default else None,
        ),
        tracker=tracker,
    )


def reacher(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("reacher5", profile)


def halfcheetah(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("halfcheetah5", profile)


def ant(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("ant5", profile)


def pusher(profile: str | None = None) -> GymnasiumBenchmark:
    return _task("pusher5", profile)


FACTORIES = {"reacher5": reacher, "halfcheetah5": halfcheetah, "ant5": ant, "pusher5": pusher}

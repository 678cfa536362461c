"""Core16's Box2D tasks: ``bipedal`` (BipedalWalker-v3) and ``racing`` (CarRacing-v3, from
pixels), each with difficulty profiles, domain Feedback and a baseline program.

bipedal: 24 floats (hull angle, its angular speed, horizontal and vertical speed; per leg
hip angle and speed, knee angle and speed, foot contact; 10 lidar ranges) and 4 torques in
[-1, 1]. Reward: forward progress, minus torque and tilt; -100 on a fall.

racing: a 96x96x3 uint8 frame (the car from above, the dashboard in its bottom 12 rows)
that reaches the policy as a read-only NumPy array; action [steer -1..1, gas 0..1, brake
0..1]. Reward: -0.1 a frame, +1000/N for each of the track's N tiles first driven over;
-100 and the end of the Episode on leaving the playfield.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gymnasium
import msgspec
import numpy as np

from evopolicygym.benchmark import (
    Artifact,
    BenchmarkError,
    CatalogEntry,
    EpisodeEnd,
    EpisodeRecord,
    EpisodeTracker,
    Feedback,
    GymnasiumBenchmark,
    Profile,
    ReferenceScores,
    StepResult,
    pick_profile,
)
from evopolicygym_box2d.filmstrip import png_strip

__all__ = [
    "BASELINES_DIR",
    "BIPEDAL_PROFILES",
    "FRAMES_ARTIFACT",
    "RACING_PROFILES",
    "RacingBenchmark",
    "RacingTracker",
    "WalkerTracker",
    "bipedal",
    "racing",
]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"
FRAMES_ARTIFACT = "frames.png"
# The summary key carrying an Episode's frame strip from the Host to score(); score() moves
# the first Episode's into the frames.png artifact and drops the rest.
_FRAMES_KEY = "frames_png"
FRAME_EVERY = 25  # steps between kept frames
FRAME_COUNT = 8  # frames in the strip, spread evenly over the Episode
FRAME_BYTES = 64 * 1024  # the strip's bound; fewer frames if it would exceed it


def _require_box2d(benchmark_id: str) -> None:
    try:
        import Box2D  # noqa: F401
    except ImportError as exc:
        raise BenchmarkError(
            f"{benchmark_id} needs the box2d extra: uv sync --extra box2d"
        ) from exc


# --- bipedal ------------------------------------------------------------------------------------


class WalkerTracker(EpisodeTracker):
    """Distance the hull travelled, its mean forward speed, and whether the walker fell or
    reached the end of the course."""

    def __init__(self) -> None:
        self.start_x = 0.0

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        self.start_x = float(env.unwrapped.hull.position.x)  # type: ignore[attr-defined]

    def termination(self, end: EpisodeEnd) -> str:
        if end.terminated:
            # BipedalWalker's only -100 is a fall (hull down, or walked off the left edge).
            return "fell" if end.reward <= -100.0 else "reached_end"
        return "truncated" if end.truncated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        from gymnasium.envs.box2d import bipedal_walker as bw

        distance = float(env.unwrapped.hull.position.x) - self.start_x  # type: ignore[attr-defined]
        course = (bw.TERRAIN_LENGTH - bw.TERRAIN_GRASS) * bw.TERRAIN_STEP - self.start_x
        fell = end.terminated and end.reward <= -100.0
        return {
            "fell": bool(fell),
            "reached_end": bool(end.terminated and not fell),
            "distance": round(distance, 3),
            "progress": round(max(0.0, distance) / course, 4),
            # World units per second (the simulation runs at 50 steps a second).
            "forward_velocity": round(distance / max(end.steps, 1) * bw.FPS, 4),
        }


BIPEDAL_PROFILES: tuple[Profile, ...] = (
    Profile(
        name="normal",
        difficulty=0,
        parameters={"hardcore": False},
        description="gently rolling terrain",
    ),
    Profile(
        name="hardcore",
        difficulty=1,
        parameters={"hardcore": True},
        description="stumps, pits and stairs on the way (BipedalWalkerHardcore)",
    ),
)
# Measured with evaluate() on the assessment split, seed 0 (evopolicy benchmarks check bipedal
# --baseline --episodes 32 --param profile=P): normal, the gait 289.90 (no falls in 32
# Episodes; it walks until the step limit) against random's -94.39 (half fall, the rest stay
# up until the limit); on hardcore's stumps
# and pits the gait falls in 31 of 32 Episodes, but further on than random.
BIPEDAL_REFERENCES: dict[str, ReferenceScores] = {
    "normal": ReferenceScores(
        baseline=289.90, random=-94.39, split="assessment", seed=0, episodes=32
    ),
    "hardcore": ReferenceScores(
        baseline=-73.45, random=-94.29, split="assessment", seed=0, episodes=32
    ),
}


def bipedal(profile: str | None = None) -> GymnasiumBenchmark:
    _require_box2d("bipedal")
    chosen = pick_profile("bipedal", BIPEDAL_PROFILES, "normal" if profile is None else profile)
    return GymnasiumBenchmark(
        "BipedalWalker-v3",
        benchmark_id="bipedal",
        description=(
            "Walk a two-legged robot to the end of the course with four joint torques, "
            f"from its joints, hull motion and lidar. Profile {chosen.name}: {chosen.description}."
        ),
        make_kwargs=dict(chosen.parameters),
        # Below any reachable return: -100 for a fall, at most about 0.11 of torque cost a step
        # over 1600 steps, walking back to the left edge and the tilt cost some tens more.
        failure_return=-400.0,
        success_threshold=300.0,
        baseline=str(BASELINES_DIR / "bipedal"),
        catalog=CatalogEntry(
            family="box2d",
            suites=("core16",) if chosen.name == "normal" else (),
            profiles=BIPEDAL_PROFILES,
            profile=chosen.name,
            reference=BIPEDAL_REFERENCES[chosen.name],
        ),
        tracker=WalkerTracker,
    )


# --- racing -------------------------------------------------------------------------------------


class RacingTracker(EpisodeTracker):
    """Tiles driven over and the share of the track, steps with every wheel off the road,
    mean speed, and a strip of small frames over the Episode (for the frames.png artifact)."""

    def __init__(self) -> None:
        self.off_track_steps = 0
        self.speed_sum = 0.0
        self.steps = 0
        self.frames: list[np.ndarray[Any, Any]] = []

    def _keep(self, observation: Any) -> None:
        frame = np.asarray(observation)
        if frame.ndim == 3 and frame.shape[2] == 3:
            self.frames.append(np.ascontiguousarray(frame[::2, ::2], dtype=np.uint8))  # 48x48

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        self._keep(observation)

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        car = env.unwrapped.car  # type: ignore[attr-defined]
        self.steps = t
        if car is None:
            return
        if all(not wheel.tiles for wheel in car.wheels):
            self.off_track_steps += 1
        velocity = car.hull.linearVelocity
        self.speed_sum += math.hypot(velocity[0], velocity[1])
        if t % FRAME_EVERY == 0 or result.terminated or result.truncated:
            self._keep(result.observation)

    def termination(self, end: EpisodeEnd) -> str:
        if end.terminated:
            return "lap_complete" if end.info.get("lap_finished") else "left_playfield"
        return "truncated" if end.truncated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        base = env.unwrapped
        tiles = int(base.tile_visited_count)  # type: ignore[attr-defined]
        track = len(base.track)  # type: ignore[attr-defined]
        fields: dict[str, Any] = {
            "lap_complete": bool(end.terminated and end.info.get("lap_finished")),
            "left_playfield": bool(end.terminated and not end.info.get("lap_finished")),
            "tiles_visited": tiles,
            "track_tiles": track,
            "track_completion": round(tiles / track, 4) if track else 0.0,
            "off_track_steps": self.off_track_steps,
            "off_track_share": round(self.off_track_steps / self.steps, 4) if self.steps else 0.0,
            "mean_speed": round(self.speed_sum / self.steps, 3) if self.steps else 0.0,
        }
        strip = _strip(self.frames)
        if strip is not None:
            fields[_FRAMES_KEY] = strip
        return fields


def _strip(frames: list[np.ndarray[Any, Any]]) -> bytes | None:
    """FRAME_COUNT of the kept frames, evenly spread, first and last included, as one PNG
    under FRAME_BYTES (fewer frames where it would not fit)."""
    count = min(FRAME_COUNT, len(frames))
    while count > 0:
        picks = sorted({round(i * (len(frames) - 1) / max(count - 1, 1)) for i in range(count)})
        data = png_strip([frames[i] for i in picks])
        if len(data) <= FRAME_BYTES:
            return data
        count -= 1
    return None


class RacingBenchmark(GymnasiumBenchmark):
    """CarRacing whose Feedback also carries ``frames.png``: the first Episode seen from
    above, a few frames spread over it."""

    def score(self, records: Any) -> Feedback:
        strip: bytes | None = None
        plain: list[EpisodeRecord] = []
        for record in records:
            found = record.summary.get(_FRAMES_KEY)
            if found is not None:
                strip = strip if strip is not None else found
                record = msgspec.structs.replace(
                    record, summary={k: v for k, v in record.summary.items() if k != _FRAMES_KEY}
                )
            plain.append(record)
        feedback = super().score(plain)
        if not isinstance(strip, bytes):
            return feedback
        frames = Artifact(
            name=FRAMES_ARTIFACT, media_type="image/png", data=strip, retention="bulk"
        )
        return Feedback(
            score=feedback.score, content=feedback.content, artifacts=(*feedback.artifacts, frames)
        )


RACING_PROFILES: tuple[Profile, ...] = (
    Profile(
        name="standard",
        difficulty=0,
        parameters={"domain_randomize": False},
        description="grey road on green grass",
    ),
    Profile(
        name="randomized",
        difficulty=1,
        parameters={"domain_randomize": True},
        description="road, grass and background colours drawn at random for each Episode",
    ),
)
# Measured as bipedal's, on only 8 Episodes: one is 1000 rendered frames, about 30 s here
# (both policies drive until the step limit in all 8); randomized on 4.
RACING_REFERENCES: dict[str, ReferenceScores] = {
    "standard": ReferenceScores(
        baseline=624.72, random=-32.72, split="assessment", seed=0, episodes=8
    ),
    "randomized": ReferenceScores(
        baseline=527.35, random=-32.80, split="assessment", seed=0, episodes=4
    ),
}
RACING_STEPS = 1000


def racing(
    profile: str | None = None, max_episode_steps: int | str = RACING_STEPS
) -> GymnasiumBenchmark:
    """``max_episode_steps`` shortens Episodes (a quick look, tests; ``--param
    max_episode_steps=100``): the references are for the full 1000 steps only."""
    _require_box2d("racing")
    chosen = pick_profile("racing", RACING_PROFILES, "standard" if profile is None else profile)
    steps = max_episode_steps
    if isinstance(steps, str) and steps.strip().isdigit():
        steps = int(steps)  # from the command line
    if type(steps) is not int or not 0 < steps <= RACING_STEPS:
        raise BenchmarkError(
            f"racing: max_episode_steps must be an integer from 1 to {RACING_STEPS}, "
            f"got {max_episode_steps!r}"
        )
    max_episode_steps = steps
    full = max_episode_steps == RACING_STEPS
    return RacingBenchmark(
        "CarRacing-v3",
        benchmark_id="racing",
        description=(
            "Drive a car round a random track from 96x96 RGB frames seen from above, visiting as "
            f"many of its tiles as possible. Profile {chosen.name}: {chosen.description}."
        ),
        make_kwargs=dict(chosen.parameters),
        max_episode_steps=max_episode_steps,
        # The worst reachable return: -0.1 every step and -100 for leaving the playfield.
        failure_return=-0.1 * max_episode_steps - 100.0,
        success_threshold=900.0,
        metadata={
            "observation": "96x96x3 uint8 RGB frame, the car at columns 46-49, rows 66-77; "
            "rows 84-95 the dashboard"
        },
        baseline=str(BASELINES_DIR / "racing"),
        catalog=CatalogEntry(
            family="box2d",
            suites=("core16",) if chosen.name == "standard" and full else (),
            profiles=RACING_PROFILES,
            profile=chosen.name,
            reference=RACING_REFERENCES.get(chosen.name) if full else None,
        ),
        tracker=RacingTracker,
    )

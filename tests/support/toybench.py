"""A tiny deterministic Benchmark for engine tests: walk a counter to a target."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from evopolicygym.benchmark import (
    BenchmarkSpec,
    EpisodeRecord,
    EpisodeSpec,
    Feedback,
    InvalidAction,
    StepResult,
)
from evopolicygym.seeds import derive_seed

CLOSED: list[int] = []  # seeds of closed Environments, for the in-process (jobs=1) tests


class CounterEnv:
    """Observation: [position, target]; action 1 moves up, 0 stays; reward 1 on reaching the
    target."""

    def __init__(self, seed: int, horizon: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.horizon = horizon
        self.t = 0
        self.position = 0
        self.target = 0

    def reset(self) -> Any:
        self.target = self.rng.randrange(3, 9)
        self.position = 0
        self.t = 0
        return [self.position, self.target]

    def step(self, action: Any) -> StepResult:
        self.t += 1
        self.position += action
        done = self.position >= self.target
        return StepResult(
            [self.position, self.target], 1.0 if done else -0.1, done, self.t >= self.horizon
        )

    def close(self) -> None:
        CLOSED.append(self.seed)


class CounterBenchmark:
    splits = ("train", "validation", "assessment")

    def __init__(self, horizon: int = 20, fail_on: str | None = None) -> None:
        self.horizon = horizon
        self.fail_on = fail_on  # "make", "reset", "step", "score": a trusted fault
        self.spec = BenchmarkSpec(
            id="toy-counter",
            description="walk a counter up to a target",
            observation_space={"type": "box", "shape": [2]},
            action_space={"type": "discrete", "n": 2, "start": 0},
            max_episode_steps=horizon,
            failure_score=-10.0,  # a completed Episode returns at least -0.1 * horizon
        )

    def plan(self, split: str, seed: int, count: int) -> list[EpisodeSpec]:
        return [
            EpisodeSpec(split=split, index=i, seed=derive_seed("toy", split, seed, i))
            for i in range(count)
        ]

    def make_environment(self, episode: EpisodeSpec) -> CounterEnv:
        if self.fail_on == "make":
            raise RuntimeError("environment factory broke")
        env = CounterEnv(episode.seed, self.horizon)
        if self.fail_on == "step":

            def broken(action: Any) -> StepResult:
                raise RuntimeError("physics exploded")

            env.step = broken  # type: ignore[method-assign]
        return env

    def validate_action(self, action: Any) -> Any:
        if type(action) is not int or action not in (0, 1):
            raise InvalidAction(f"action must be 0 or 1, got {action!r}")
        return action

    def sample_action(self, rng: random.Random) -> Any:
        return rng.randrange(2)

    def score(self, records: Sequence[EpisodeRecord]) -> Feedback:
        if self.fail_on == "score":
            raise RuntimeError("scorer broke")
        returns = [r.total_reward if r.status == "ok" else self.spec.failure_score for r in records]
        return Feedback(
            score=sum(returns) / len(returns) if returns else 0.0,
            content={"returns": returns, "statuses": [r.status for r in records]},
        )

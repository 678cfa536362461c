"""One Episode of a Gymnasium environment, and the trackers that give it domain Feedback."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium
import msgspec
import numpy as np

from evopolicygym.benchmark.contract import SUMMARY_TERMINATION, BenchmarkError, StepResult
from evopolicygym.benchmark.gymnasium_adapter.videos import FrameSource, Recorder
from evopolicygym.benchmark.video import VIDEO_KEY, VideoOptions

__all__ = [
    "ClassifiedTracker",
    "EpisodeEnd",
    "EpisodeTracker",
    "GymnasiumEnvironment",
    "default_termination",
]


def _observation(value: Any) -> Any:
    """Arrays stay arrays (the codec makes them tensors); NumPy scalars become Python scalars."""
    kind = type(value)
    if kind is np.ndarray or kind is int or kind is float:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if kind is tuple:
        return tuple(_observation(v) for v in value)
    if kind is dict:
        return {str(k): _observation(v) for k, v in value.items()}
    if kind is list:
        return [_observation(v) for v in value]
    return value


class EpisodeEnd(msgspec.Struct, frozen=True, kw_only=True):
    """How an Episode ended, as its Environment saw it: what a termination classifier reads.
    ``info`` is Gymnasium's info dict of the last step (of reset, before any step)."""

    steps: int
    total_reward: float
    reward: float
    terminated: bool
    truncated: bool
    observation: Any = None
    info: dict[str, Any] = {}


def default_termination(end: EpisodeEnd) -> str:
    """``truncated`` at the step limit, ``terminated`` when the environment ended it, and
    ``stopped`` when neither (the policy failed, or the Host stopped it first)."""
    if end.truncated:
        return "truncated"
    return "terminated" if end.terminated else "stopped"


class EpisodeTracker:
    """The domain Feedback of one Episode of a Gymnasium environment, kept in the Host.

    A family subclasses it to say why an Episode ended (``termination``) and to add its own
    public per-Episode fields (``summary``); the Benchmark makes one per Episode. It sees the
    environment itself (``env.unwrapped``), so it may read state the policy never sees, but
    what it returns is public: never an Episode's seed or scenario. Values must be
    PolicyValues (numbers, bools, strings, None, small lists and dicts).
    """

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        """Called after reset."""

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        """Called after step ``t`` (1 for the first step)."""

    def termination(self, end: EpisodeEnd) -> str:
        """Why the Episode ended: a short word (reached_goal, truncated, fell, collided...)."""
        return default_termination(end)

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        """The family's public per-Episode fields (bools become rates, numbers means in the
        Feedback's ``domain`` summary)."""
        return {}


class ClassifiedTracker(EpisodeTracker):
    """A tracker whose only addition is a termination classifier."""

    def __init__(self, classify: Callable[[EpisodeEnd], str]) -> None:
        self._classify = classify

    def termination(self, end: EpisodeEnd) -> str:
        return self._classify(end)


class GymnasiumEnvironment:
    """One Episode of a Gymnasium environment, reset with the Episode's seed; with a tracker,
    it follows the Episode for its domain summary (``summary()``, asked after the last step)."""

    def __init__(
        self,
        env: gymnasium.Env[Any, Any],
        seed: int,
        tracker: EpisodeTracker | None = None,
        *,
        video: tuple[VideoOptions, FrameSource | None] | None = None,
    ) -> None:
        self._env: gymnasium.Env[Any, Any] | None = env
        self._video = video
        self._recorder: Recorder | None = None
        self._seed = seed
        self._tracker = tracker
        self._steps = 0
        self._total = 0.0
        self._last: StepResult | None = None
        self._info: dict[str, Any] = {}

    def reset(self) -> Any:
        if self._env is None:
            raise BenchmarkError("reset() after close()")
        observation, info = self._env.reset(seed=self._seed)
        self._info = info
        if self._tracker is not None:
            self._tracker.on_reset(self._env, observation, info)
        if self._video is not None:
            self._recorder = Recorder(self._env, *self._video)
            self._recorder.sampler.offer(0)
        return _observation(observation)

    def step(self, action: Any) -> StepResult:
        if self._env is None:
            raise BenchmarkError("step() after close()")
        observation, reward, terminated, truncated, info = self._env.step(action)
        reward = float(reward)
        if not math.isfinite(reward):
            raise BenchmarkError(f"environment returned a non-finite reward {reward!r}")
        result = StepResult(_observation(observation), reward, bool(terminated), bool(truncated))
        self._steps += 1
        self._total += reward
        self._last = result
        self._info = info
        if self._tracker is not None:
            self._tracker.on_step(self._env, self._steps, action, result, info)
        if self._recorder is not None:
            self._recorder.sampler.offer(self._steps)
        return result

    def end(self) -> EpisodeEnd:
        last = self._last
        return EpisodeEnd(
            steps=self._steps,
            total_reward=self._total,
            reward=0.0 if last is None else last.reward,
            terminated=False if last is None else last.terminated,
            truncated=False if last is None else last.truncated,
            observation=None if last is None else last.observation,
            info=self._info,
        )

    def summary(self) -> dict[str, Any]:
        """Why the Episode ended and the family's fields (see EpisodeTracker)."""
        if self._env is None:
            raise BenchmarkError("summary() after close()")
        end = self.end()
        tracker = self._tracker or EpisodeTracker()
        fields = {SUMMARY_TERMINATION: tracker.termination(end), **tracker.summary(self._env, end)}
        if self._recorder is not None:
            fields[VIDEO_KEY] = self._recorder.encoded(self._steps)
        return fields

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()

"""``GymnasiumBenchmark``: a Benchmark over one Gymnasium environment id, and
``make_gymnasium_benchmark``, the entry point behind ids such as ``gymnasium:CartPole-v1``."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import msgspec
from gymnasium import spaces

from evopolicygym.benchmark.catalog import CatalogEntry
from evopolicygym.benchmark.contract import (
    BenchmarkError,
    BenchmarkSpec,
    EpisodeRecord,
    EpisodeSpec,
    Feedback,
)
from evopolicygym.benchmark.gymnasium_adapter.environment import (
    ClassifiedTracker,
    EpisodeEnd,
    EpisodeTracker,
    GymnasiumEnvironment,
)
from evopolicygym.benchmark.gymnasium_adapter.known import (
    KNOWN_ENVIRONMENTS,
    environment_name,
    worst_return,
)
from evopolicygym.benchmark.gymnasium_adapter.lookup import dependency_hint, lookup_spec
from evopolicygym.benchmark.gymnasium_adapter.params import (
    BENCHMARK_PARAMETERS,
    checked_params,
    shown,
)
from evopolicygym.benchmark.gymnasium_adapter.scoring import feedback
from evopolicygym.benchmark.gymnasium_adapter.spaces import describe_space, sample_space
from evopolicygym.benchmark.gymnasium_adapter.validation import Validator, make_validator
from evopolicygym.benchmark.gymnasium_adapter.videos import FrameSource, published_videos
from evopolicygym.benchmark.video import VideoOptions
from evopolicygym.seeds import seed_deriver
from evopolicygym.values import PolicyValueError, encode_value

__all__ = ["GymnasiumBenchmark", "make_gymnasium_benchmark"]

SPLITS = ("train", "validation", "assessment")
_ABSENT = object()
DEFAULT_MAX_EPISODE_STEPS = 1000


class GymnasiumBenchmark:
    """A Benchmark over one Gymnasium environment id.

    Episode return is the undiscounted sum of rewards. A failed Episode (any failure
    class) scores ``failure_return``: given, or derived from the environment's reward
    bounds and step limit (``WORST_RETURNS``); it is the spec's ``failure_score``. A
    completed Episode scores its return, but never below the failure score (a return
    under it, possible only if the bound given is not one, counts as the failure score
    and in ``below_failure_score``), so failing never pays. The score is the mean
    (maximize). With neither a given nor a derived failure score the Benchmark can be
    described but not evaluated.
    """

    splits: tuple[str, ...] = SPLITS

    def __init__(
        self,
        env_id: str,
        *,
        benchmark_id: str | None = None,
        description: str | None = None,
        make_kwargs: dict[str, Any] | None = None,
        max_episode_steps: int | None = None,
        failure_return: float | None = None,
        metadata: dict[str, Any] | None = None,
        success_threshold: float | None = None,
        baseline: str | None = None,
        catalog: CatalogEntry | None = None,
        tracker: Callable[[], EpisodeTracker] | None = None,
        termination: Callable[[EpisodeEnd], str] | None = None,
        wrap: Callable[[gymnasium.Env[Any, Any]], gymnasium.Env[Any, Any]] | None = None,
        parameters: dict[str, Any] | None = None,
        frame: FrameSource | None = None,
        video: VideoOptions | None = None,
    ) -> None:
        registered = lookup_spec(env_id)
        if tracker is not None and termination is not None:
            raise BenchmarkError(
                "give tracker or termination, not both (a tracker has its own termination)"
            )
        # Module-level callables and classes, so the Benchmark still pickles into workers.
        self.catalog = catalog
        self.tracker = tracker
        self.termination = termination
        self.wrap = wrap
        # Episode videos (evopolicygym.benchmark.video): ``frame`` renders the current state
        # (default: the environment's own rgb_array render); ``video`` None records none.
        self.frame = frame
        self.video = video
        # The Benchmark's own public parameters (what ``wrap`` does, say): in the spec's
        # environment parameters and so its digest, never passed to gymnasium.make.
        self.parameters = dict(parameters or {})
        self.env_id = env_id
        self.benchmark_id = benchmark_id or f"gymnasium:{env_id}"
        self.description = description or f"Gymnasium environment {env_id}"
        self.make_kwargs = dict(make_kwargs or {})
        if max_episode_steps is None:
            max_episode_steps = registered.max_episode_steps or DEFAULT_MAX_EPISODE_STEPS
        if type(max_episode_steps) is not int or max_episode_steps <= 0:
            raise BenchmarkError(
                f"max_episode_steps must be a positive int, got {max_episode_steps!r}"
            )
        self.max_episode_steps = max_episode_steps
        if failure_return is None:
            failure_return = worst_return(env_id, max_episode_steps)
        elif (
            isinstance(failure_return, bool)
            or not isinstance(failure_return, int | float)
            or not math.isfinite(failure_return)
        ):
            raise BenchmarkError(f"failure_return must be a finite number, got {failure_return!r}")
        self.failure_return = None if failure_return is None else float(failure_return)
        self.success_threshold = None if success_threshold is None else float(success_threshold)
        self.extra_metadata = dict(metadata or {})
        self.reward_threshold = registered.reward_threshold
        self.baseline = baseline
        for name, value in (
            ("make_kwargs", self.make_kwargs),
            ("metadata", self.extra_metadata),
            ("parameters", self.parameters),
        ):
            try:
                encode_value(value)
            except PolicyValueError as exc:
                raise BenchmarkError(
                    f"{self.benchmark_id}: {name} must be PolicyValues: {exc}"
                ) from exc
        self._spaces: tuple[spaces.Space[Any], spaces.Space[Any]] | None = None
        self._validator: Validator | None = None
        self._spec: BenchmarkSpec | None = None

    # Gymnasium spaces and the compiled validator are rebuilt lazily in each process.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_spaces"] = None
        state["_validator"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"GymnasiumBenchmark({self.env_id!r}, benchmark_id={self.benchmark_id!r})"

    def _make(self) -> gymnasium.Env[Any, Any]:
        env = self._make_raw()
        return env if self.wrap is None else self.wrap(env)

    def _make_raw(self) -> gymnasium.Env[Any, Any]:
        # The environment's own renderer draws video frames when the family gives none.
        rendering = {"render_mode": "rgb_array"} if self.video and self.frame is None else {}
        try:
            return gymnasium.make(
                self.env_id,
                max_episode_steps=self.max_episode_steps,
                disable_env_checker=True,
                **self.make_kwargs,
                **rendering,
            )
        except gymnasium.error.DependencyNotInstalled as exc:
            raise BenchmarkError(
                f"{self.benchmark_id}: missing dependency: {dependency_hint(str(exc))}"
            ) from exc
        except gymnasium.error.Error as exc:
            raise BenchmarkError(
                f"{self.benchmark_id}: cannot make {self.env_id!r}: {exc}"
            ) from exc
        except (KeyError, ValueError, IndexError, AssertionError) as exc:
            if not self.make_kwargs:
                raise  # the environment's own defaults fail: a bug, not a parameter
            given = ", ".join(f"{key}={shown(value)}" for key, value in self.make_kwargs.items())
            raise BenchmarkError(
                f"{self.benchmark_id}: {self.env_id} refuses --param {given} "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    @property
    def spaces(self) -> tuple[spaces.Space[Any], spaces.Space[Any]]:
        """(observation space, action space), from one throwaway environment."""
        if self._spaces is None:
            env = self._make()
            try:
                self._spaces = (env.observation_space, env.action_space)
            finally:
                env.close()
        return self._spaces

    @property
    def spec(self) -> BenchmarkSpec:
        if self._spec is None:
            observation_space, action_space = self.spaces
            metadata: dict[str, Any] = {"env_id": self.env_id}
            if self.reward_threshold is not None:
                metadata["reward_threshold"] = float(self.reward_threshold)
            metadata.update(KNOWN_ENVIRONMENTS.get(environment_name(self.env_id), {}))
            metadata["episode_return"] = "undiscounted sum of rewards"
            if self.success_threshold is not None:
                metadata["success_threshold"] = self.success_threshold
            parameters: dict[str, Any] = {
                **self.make_kwargs,
                **self.parameters,
                "max_episode_steps": self.max_episode_steps,
            }
            catalog = self.catalog
            if catalog is not None:
                metadata["family"] = catalog.family
                if catalog.profile is not None:
                    # In the parameters, so the digest tells one profile's scores from another's,
                    # unless the make keywords already do (the profile is just their name).
                    chosen = next(p for p in catalog.profiles if p.name == catalog.profile)
                    if any(
                        self.make_kwargs.get(k, _ABSENT) != v for k, v in chosen.parameters.items()
                    ):
                        parameters["profile"] = catalog.profile
                    metadata["profile"] = catalog.profile
                    metadata["difficulty"] = catalog.difficulty
                if catalog.reference is not None:
                    metadata["reference_scores"] = msgspec.to_builtins(catalog.reference)
                if not catalog.deterministic:
                    metadata["deterministic"] = False
            metadata.update(self.extra_metadata)
            self._spec = BenchmarkSpec(
                id=self.benchmark_id,
                description=self.description,
                observation_space=describe_space(observation_space),
                action_space=describe_space(action_space),
                max_episode_steps=self.max_episode_steps,
                primary_metric="mean_return",
                score_direction="maximize",
                failure_score=self.failure_return,
                metadata=metadata,
                environment_parameters=parameters,
            )
        return self._spec

    @spec.setter
    def spec(self, value: BenchmarkSpec) -> None:
        self._spec = value

    def baseline_dir(self) -> Path | None:
        return None if self.baseline is None else Path(self.baseline)

    def plan(self, split: str, seed: int, count: int) -> list[EpisodeSpec]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(self.splits)}")
        episode_seed = seed_deriver(
            "episode", self.benchmark_id, split, seed
        )  # derive_seed(..., i)
        return [EpisodeSpec(split=split, index=i, seed=episode_seed(i)) for i in range(count)]

    def make_environment(self, episode: EpisodeSpec) -> GymnasiumEnvironment:
        tracker: EpisodeTracker | None = None
        if self.tracker is not None:
            tracker = self.tracker()
        elif self.termination is not None:
            tracker = ClassifiedTracker(self.termination)
        video = None if self.video is None else (self.video, self.frame)
        return GymnasiumEnvironment(self._make(), episode.seed, tracker, video=video)

    def with_videos(self, options: VideoOptions | None = None) -> GymnasiumBenchmark:
        """This Benchmark recording Episode videos (``options``; default: the best and the
        worst Episode of each Evaluation); scores and Episodes are unchanged."""
        other = copy.copy(self)
        other.video = options or VideoOptions()
        return other

    def validate_action(self, action: Any) -> Any:
        validator = self._validator
        if validator is None:
            validator = self._validator = make_validator(self.spaces[1])
        return validator(action)

    def sample_action(self, rng: random.Random) -> Any:
        return sample_space(self.spaces[1], rng)

    def episode_return(self, record: EpisodeRecord) -> float:
        """What the Episode scores: its return, the failure score when it failed, and never
        less than the failure score."""
        floor = self.failure_return
        if floor is None:
            raise BenchmarkError(
                f"{self.benchmark_id} has no failure score: give one with "
                "--param failure_return=<the worst return an Episode can have>"
            )
        if record.status != "ok":
            return floor
        return max(float(record.total_reward), floor)

    def score(self, records: Sequence[EpisodeRecord]) -> Feedback:
        plain, videos = published_videos(records, self.episode_return, self.video)
        returns = [self.episode_return(r) for r in plain]
        scored = feedback(
            plain,
            returns,
            failure_return=self.failure_return,
            success_threshold=self.success_threshold,
            deterministic=self.catalog is None or self.catalog.deterministic,
        )
        if not videos.artifacts:
            return scored
        return Feedback(
            score=scored.score,
            content={**scored.content, "videos": videos.listing},
            artifacts=(*scored.artifacts, *videos.artifacts),
        )


def make_gymnasium_benchmark(env_id: str, **params: Any) -> GymnasiumBenchmark:
    """The ``gymnasium:<env id>`` entry point.

    ``max_episode_steps``, ``failure_return``, ``success_threshold`` and
    ``description`` configure the Benchmark; every other parameter is passed to
    ``gymnasium.make``. String values that read as JSON scalars become those scalars;
    a value that does not read as the type its parameter takes (where the environment's
    constructor tells it, by annotation or default) is a BenchmarkError.
    """
    options: dict[str, Any] = {}
    if "description" in params:
        options["description"] = str(params.pop("description"))
    params = checked_params(env_id, params)
    for key in BENCHMARK_PARAMETERS:
        if key in params:
            options[key] = params.pop(key)
    return GymnasiumBenchmark(env_id, make_kwargs=params, **options)

"""Any Gymnasium environment as a Benchmark.

``GymnasiumBenchmark`` stores only the environment id and its parameters, so it
pickles cheaply into evaluation workers; the Gymnasium spaces are built lazily
from one throwaway environment and cached per process. Actions are validated
against the Gymnasium action space and never clipped. ``make_gymnasium_benchmark``
is the entry point behind ids such as ``gymnasium:CartPole-v1``.
"""

from __future__ import annotations

import importlib
import inspect
import math
import random
import re
import statistics
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, metadata
from pathlib import Path
from typing import Any

import gymnasium
import msgspec
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import load_env_creator

from evopolicygym.benchmark.catalog import CatalogEntry
from evopolicygym.benchmark.contract import (
    SUMMARY_TERMINATION,
    Artifact,
    BenchmarkError,
    BenchmarkSpec,
    EpisodeRecord,
    EpisodeSpec,
    Feedback,
    InvalidAction,
    StepResult,
)
from evopolicygym.policy import TensorValue
from evopolicygym.seeds import seed_deriver
from evopolicygym.values import PolicyValueError, encode_value, tensor_to_array

__all__ = [
    "EpisodeEnd",
    "EpisodeTracker",
    "GymnasiumBenchmark",
    "GymnasiumEnvironment",
    "describe_space",
    "make_gymnasium_benchmark",
]

SPLITS = ("train", "validation", "assessment")
_ABSENT = object()
DEFAULT_MAX_EPISODE_STEPS = 1000

TRACE_EPISODES = 3
TRACE_STEPS = 200
TRACE_BYTES = 256 * 1024
# Larger arrays are summarised in traces; a full image frame per step would crowd out the rest.
TRACE_ARRAY_ITEMS = 1024
OUTPUT_CHARS = 2000
FAILURE_CHARS = 500
# Larger Box bounds are written as one scalar when uniform (an image's 0 and 255), to keep
# the spec small.
UNIFORM_BOUNDS_ITEMS = 16

# Public descriptions of what observations and actions mean, keyed by environment name.
KNOWN_ENVIRONMENTS: dict[str, dict[str, str]] = {
    "CartPole": {
        "observation": "[cart position, cart velocity, pole angle (rad), pole angular velocity]",
        "action": "0 pushes the cart left, 1 pushes it right",
        "reward": "+1 per step while the pole stays up; the Episode ends when it falls",
    },
    "FrozenLake": {
        "observation": "current cell as row * ncols + col",
        "action": "0 left, 1 down, 2 right, 3 up; on slippery ice the move may go sideways",
        "reward": "1 on reaching the goal G, else 0; falling into a hole H ends the Episode",
    },
    "Acrobot": {
        "observation": "[cos t1, sin t1, cos t2, sin t2, dt1, dt2] (joint angles, velocities)",
        "action": "torque on the middle joint: 0 is -1, 1 is 0, 2 is +1",
        "reward": "-1 per step until the tip swings above the target height",
    },
    "MountainCarContinuous": {
        "observation": "[car position, car velocity]",
        "action": "[force] in [-1, 1]",
        "reward": "+100 on reaching the flag at position 0.45, minus 0.1 * force^2 per step",
    },
    "MountainCar": {
        "observation": "[car position, car velocity]",
        "action": "0 pushes left, 1 does nothing, 2 pushes right",
        "reward": "-1 per step until the car reaches the flag",
    },
    "Pendulum": {
        "observation": "[cos theta, sin theta, angular velocity]",
        "action": "[torque] in [-2, 2]",
        "reward": "minus a cost on angle from upright, velocity and torque",
    },
    "LunarLander": {
        "observation": "[x, y, vx, vy, angle, angular velocity, left leg contact, right leg contact]",
        "action": "0 noop, 1 fire left engine, 2 fire main engine, 3 fire right engine",
        "reward": "shaped by distance, speed, tilt and leg contact; -100 on crash, +100 on landing",
    },
}


# The worst return an Episode of at most T steps can have, from each environment's reward
# bounds (as Gymnasium documents and implements them): the failure score derived for
# ``gymnasium:<id>`` when none is given. An environment missing here needs
# ``--param failure_return=...``.
WORST_RETURNS: dict[str, Callable[[int], float]] = {
    "CartPole": lambda steps: 0.0,  # +1 per step
    "FrozenLake": lambda steps: 0.0,  # 0 or 1
    "MountainCar": lambda steps: -1.0 * steps,  # -1 per step
    "Acrobot": lambda steps: -1.0 * steps,  # -1 per step, 0 on the last
    "MountainCarContinuous": lambda steps: -0.1 * steps,  # -0.1 * force^2, force in [-1, 1]
    # -(angle^2 + 0.1 * speed^2 + 0.001 * torque^2), angle in [-pi, pi], speed in [-8, 8],
    # torque in [-2, 2]
    "Pendulum": lambda steps: -(math.pi**2 + 0.1 * 64 + 0.001 * 4) * steps,
    "Taxi": lambda steps: -10.0 * steps,  # -1 per step, -10 for an illegal pick-up or drop-off
    "CliffWalking": lambda steps: -100.0 * steps,  # -1 per step, -100 for the cliff
    "Blackjack": lambda steps: -1.0,  # one reward, -1 for a loss
}


def environment_name(env_id: str) -> str:
    """``CartPole`` for ``CartPole-v1``, ``gymnasium_robotics:FetchPush-v4`` -> ``FetchPush``."""
    return env_id.rsplit(":", 1)[-1].rsplit("/", 1)[-1].split("-v", 1)[0]


def worst_return(env_id: str, max_episode_steps: int) -> float | None:
    """The derived failure score of ``env_id`` under a step limit, None where unknown."""
    bound = WORST_RETURNS.get(environment_name(env_id))
    return None if bound is None else float(bound(max_episode_steps))


def describe_space(space: spaces.Space[Any]) -> Any:
    """A PolicyValue description of a Gymnasium space (see the module docs of values.py)."""
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {
            "type": "box",
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
            "low": _bounds(space.low),
            "high": _bounds(space.high),
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "multi_discrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
        }
    if isinstance(space, spaces.MultiBinary):
        n = space.n
        return {"type": "multi_binary", "n": n if isinstance(n, int) else [int(d) for d in n]}
    if isinstance(space, spaces.Tuple):
        return {"type": "tuple", "spaces": [describe_space(s) for s in space.spaces]}
    if isinstance(space, spaces.Dict):
        return {
            "type": "dict",
            "spaces": {str(k): describe_space(s) for k, s in space.spaces.items()},
        }
    # Without object addresses ("<function f at 0x7f...>"), so the spec is the same in every process.
    return {"type": "other", "repr": re.sub(r" at 0x[0-9a-fA-F]+", "", str(space))}


def _bounds(array: np.ndarray[Any, Any]) -> Any:
    def finite(x: Any) -> Any:
        return x if not isinstance(x, float) or math.isfinite(x) else None

    if array.size > UNIFORM_BOUNDS_ITEMS and bool(np.all(array == array.flat[0])):
        return finite(array.flat[0].item())

    def walk(x: Any) -> Any:
        return [walk(v) for v in x] if isinstance(x, list) else finite(x)

    return walk(array.tolist())


# --- action validation -------------------------------------------------------------------------

Validator = Callable[[Any], Any]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _discrete_validator(space: spaces.Discrete) -> Validator:
    start = int(space.start)
    stop = start + int(space.n)

    def validate(action: Any) -> Any:
        if type(action) is int and start <= action < stop:
            return action
        if isinstance(action, np.integer) and start <= action < stop:
            return int(action)
        if type(action) is int or isinstance(action, np.integer):
            raise InvalidAction(f"action {action} is outside [{start}, {stop})")
        raise InvalidAction(
            f"action must be an int in [{start}, {stop}), got {type(action).__name__} "
            f"{_short(action)}"
        )

    return validate


def _all_real(items: Any) -> bool:
    """True when a (nested) list/tuple holds only ints and floats (no bools, strings, None)."""
    for x in items:
        kind = type(x)
        if kind is float or kind is int:
            continue
        if kind is list or kind is tuple:
            if not _all_real(x):
                return False
        elif not isinstance(x, np.floating | np.integer):
            return False
    return True


def _numeric_array(action: Any, shape: tuple[int, ...], what: str) -> np.ndarray[Any, Any]:
    """``action`` as a float64 array of ``shape``, or InvalidAction. Bare scalars fit shape (1,)."""
    kind = type(action)
    if kind is np.ndarray:
        if action.dtype.kind not in "iuf":
            raise InvalidAction(f"{what} array has dtype {action.dtype}, expected a numeric dtype")
    elif kind is list or kind is tuple:
        if not _all_real(action):
            raise InvalidAction(f"{what} must hold only numbers, got {_short(action)}")
    elif not (kind is float or kind is int or isinstance(action, np.floating | np.integer)):
        raise InvalidAction(
            f"{what} must be a list of numbers or an array, got {type(action).__name__}"
        )
    try:
        values = np.asarray(action, dtype=np.float64)
    except (ValueError, OverflowError, TypeError) as exc:
        raise InvalidAction(f"{what} is not a rectangular array of numbers") from exc
    if values.shape != shape:
        if values.ndim == 0 and shape == (1,):
            values = values.reshape(1)
        else:
            raise InvalidAction(f"{what} has shape {list(values.shape)}, expected {list(shape)}")
    return values


def _box_validator(space: spaces.Box) -> Validator:
    shape = tuple(space.shape)
    dtype = space.dtype
    low = space.low.astype(np.float64)
    high = space.high.astype(np.float64)
    integral = np.dtype(dtype).kind in "iu"
    # With finite bounds one comparison also rejects NaN and infinities (the per-step fast path).
    bounded = bool(np.isfinite(low).all() and np.isfinite(high).all())

    def validate(action: Any) -> Any:
        values = _numeric_array(action, shape, "action")
        if not (bounded and ((values >= low) & (values <= high)).all()):
            if not np.isfinite(values).all():
                raise InvalidAction(f"action has a non-finite value: {_short(values.tolist())}")
            if not (values >= low).all():
                raise InvalidAction(f"action {_short(values.tolist())} is below the lower bound")
            if not (values <= high).all():
                raise InvalidAction(f"action {_short(values.tolist())} is above the upper bound")
        if integral and not (values == np.floor(values)).all():
            raise InvalidAction(f"action {_short(values.tolist())} must be integral")
        return values.astype(dtype)

    return validate


def _integer_array_validator(
    shape: tuple[int, ...], low: np.ndarray[Any, Any], high: np.ndarray[Any, Any], dtype: Any
) -> Validator:
    """Integer arrays with inclusive per-element bounds (MultiDiscrete, MultiBinary)."""

    def validate(action: Any) -> Any:
        if type(action) is np.ndarray and action.dtype.kind not in "iu":
            raise InvalidAction(f"action array has dtype {action.dtype}, expected integers")
        if (type(action) is list or type(action) is tuple) and not _all_ints(action):
            raise InvalidAction(f"action must hold only ints, got {_short(action)}")
        values = _numeric_array(action, shape, "action")
        if not ((values >= low).all() and (values <= high).all()):
            raise InvalidAction(f"action {_short(values.tolist())} is out of range")
        return values.astype(dtype)

    return validate


def _all_ints(items: Any) -> bool:
    for x in items:
        kind = type(x)
        if kind is list or kind is tuple:
            if not _all_ints(x):
                return False
        elif kind is not int and not isinstance(x, np.integer):
            return False
    return True


def _make_validator(space: spaces.Space[Any]) -> Validator:
    if isinstance(space, spaces.Discrete):
        return _discrete_validator(space)
    if isinstance(space, spaces.Box):
        return _box_validator(space)
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start, dtype=np.float64)
        high = start + np.asarray(space.nvec, dtype=np.float64) - 1
        return _integer_array_validator(tuple(space.shape), start, high, space.dtype)
    if isinstance(space, spaces.MultiBinary):
        zeros = np.zeros(space.shape, dtype=np.float64)
        return _integer_array_validator(tuple(space.shape), zeros, zeros + 1, space.dtype)
    if isinstance(space, spaces.Tuple):
        parts = [_make_validator(s) for s in space.spaces]

        def validate_tuple(action: Any) -> Any:
            if type(action) not in (tuple, list) or len(action) != len(parts):
                raise InvalidAction(f"action must be a sequence of {len(parts)} actions")
            return tuple(v(a) for v, a in zip(parts, action, strict=True))

        return validate_tuple
    if isinstance(space, spaces.Dict):
        fields = {k: _make_validator(s) for k, s in space.spaces.items()}

        def validate_dict(action: Any) -> Any:
            if type(action) is not dict or action.keys() != fields.keys():
                raise InvalidAction(f"action must be a dict with keys {sorted(fields)}")
            return {k: v(action[k]) for k, v in fields.items()}

        return validate_dict

    def validate_other(action: Any) -> Any:
        try:
            ok = space.contains(action)
        except Exception:
            ok = False
        if not ok:
            raise InvalidAction(f"action {_short(action)} is not in {space}")
        return action

    return validate_other


def _sample(space: spaces.Space[Any], rng: random.Random) -> Any:
    if isinstance(space, spaces.Discrete):
        return int(space.start) + rng.randrange(int(space.n))
    if isinstance(space, spaces.Box):
        integral = np.dtype(space.dtype).kind in "iu"
        out = []
        for lo, hi in zip(space.low.flat, space.high.flat, strict=True):
            lo, hi = float(lo), float(hi)
            if integral:
                lo = max(lo, -(2.0**31)) if math.isinf(lo) else lo
                hi = min(hi, 2.0**31) if math.isinf(hi) else hi
                out.append(float(rng.randint(math.ceil(lo), math.floor(hi))))
            elif math.isfinite(lo) and math.isfinite(hi):
                out.append(rng.uniform(lo, hi))
            elif math.isfinite(lo):
                out.append(lo + rng.expovariate(1.0))
            elif math.isfinite(hi):
                out.append(hi - rng.expovariate(1.0))
            else:
                out.append(rng.gauss(0.0, 1.0))
        return np.asarray(out, dtype=space.dtype).reshape(space.shape)
    if isinstance(space, spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        start = np.asarray(space.start)
        picks = [int(s) + rng.randrange(int(n)) for n, s in zip(nvec.flat, start.flat, strict=True)]
        return np.asarray(picks, dtype=space.dtype).reshape(space.shape)
    if isinstance(space, spaces.MultiBinary):
        bits = [rng.randrange(2) for _ in range(int(np.prod(space.shape)))]
        return np.asarray(bits, dtype=space.dtype).reshape(space.shape)
    if isinstance(space, spaces.Tuple):
        return tuple(_sample(s, rng) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return {k: _sample(s, rng) for k, s in space.spaces.items()}
    # Unknown space: its own sampler, reseeded from ``rng`` so the draw stays deterministic.
    space.seed(rng.getrandbits(63))
    return space.sample()


# --- environment -------------------------------------------------------------------------------


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


class _ClassifiedTracker(EpisodeTracker):
    """A tracker whose only addition is a termination classifier."""

    def __init__(self, classify: Callable[[EpisodeEnd], str]) -> None:
        self._classify = classify

    def termination(self, end: EpisodeEnd) -> str:
        return self._classify(end)


class GymnasiumEnvironment:
    """One Episode of a Gymnasium environment, reset with the Episode's seed; with a tracker,
    it follows the Episode for its domain summary (``summary()``, asked after the last step)."""

    def __init__(
        self, env: gymnasium.Env[Any, Any], seed: int, tracker: EpisodeTracker | None = None
    ) -> None:
        self._env: gymnasium.Env[Any, Any] | None = env
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
        return {SUMMARY_TERMINATION: tracker.termination(end), **tracker.summary(self._env, end)}

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()


# --- the Benchmark -----------------------------------------------------------------------------


def _install_hint(message: str) -> str:
    """Gymnasium's missing-dependency text with its pip advice replaced by this project's extra.

    Gymnasium says ``pip install "gymnasium[box2d]"``, which builds box2d-py with swig; the
    project's ``box2d`` extra installs the box2d wheel and pygame instead. Text naming no extra
    of this project is kept.
    """
    try:
        extras = set(metadata("evopolicygym").get_all("Provides-Extra") or [])
    except PackageNotFoundError:
        return message
    named = re.search(r"gymnasium\[(\w+)\]", message)
    if named and named.group(1).lower() in extras:
        missing = re.split(r",|\.| is not installed", message, maxsplit=1)[0].strip()
        extra = named.group(1).lower()
        return f"{missing} is not installed; install it with: uv sync --extra {extra}"
    return message


# Environment ids registered only when their package is imported (Gymnasium 1.x loads no
# plugins): id prefix -> (the module to name, the extra that installs it).
_REGISTERED_ON_IMPORT = {
    "ALE/": ("ale_py", "ale"),
    "MiniGrid-": ("minigrid", "minigrid"),
    "BabyAI-": ("minigrid", "minigrid"),
}


def _register_hint(env_id: str) -> str:
    """For an id whose package registers it on import: the id that imports it, and the extra."""
    for prefix, (module, extra) in _REGISTERED_ON_IMPORT.items():
        if env_id.startswith(prefix):
            return (
                f" {module} registers it when imported, so name it gymnasium:{module}:{env_id}"
                f" ({module} is installed by: uv sync --extra {extra})"
            )
    return ""


def _lookup_spec(env_id: str) -> Any:
    """The registered EnvSpec; ``module:Env-v0`` imports ``module`` first, like gymnasium.make."""
    name = env_id
    if ":" in env_id:
        module, name = env_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BenchmarkError(
                f"Gymnasium environment {env_id!r}: cannot import {module!r} ({exc})"
            ) from exc
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error as exc:
        raise BenchmarkError(
            f"unknown Gymnasium environment id {env_id!r}: {exc}{_register_hint(env_id)}"
        ) from exc


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
    ) -> None:
        registered = _lookup_spec(env_id)
        if tracker is not None and termination is not None:
            raise BenchmarkError(
                "give tracker or termination, not both (a tracker has its own termination)"
            )
        # Module-level callables and classes, so the Benchmark still pickles into workers.
        self.catalog = catalog
        self.tracker = tracker
        self.termination = termination
        self.wrap = wrap
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
        try:
            return gymnasium.make(
                self.env_id,
                max_episode_steps=self.max_episode_steps,
                disable_env_checker=True,
                **self.make_kwargs,
            )
        except gymnasium.error.DependencyNotInstalled as exc:
            raise BenchmarkError(
                f"{self.benchmark_id}: missing dependency: {_install_hint(str(exc))}"
            ) from exc
        except gymnasium.error.Error as exc:
            raise BenchmarkError(
                f"{self.benchmark_id}: cannot make {self.env_id!r}: {exc}"
            ) from exc
        except (KeyError, ValueError, IndexError, AssertionError) as exc:
            if not self.make_kwargs:
                raise  # the environment's own defaults fail: a bug, not a parameter
            given = ", ".join(f"{key}={_shown(value)}" for key, value in self.make_kwargs.items())
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
            tracker = _ClassifiedTracker(self.termination)
        return GymnasiumEnvironment(self._make(), episode.seed, tracker)

    def validate_action(self, action: Any) -> Any:
        validator = self._validator
        if validator is None:
            validator = self._validator = _make_validator(self.spaces[1])
        return validator(action)

    def sample_action(self, rng: random.Random) -> Any:
        return _sample(self.spaces[1], rng)

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
        returns = [self.episode_return(r) for r in records]
        floor = self.failure_return
        below = sum(
            1 for r in records if r.status == "ok" and floor is not None and r.total_reward < floor
        )
        failures: dict[str, int] = {}
        terminations: dict[str, int] = {}
        episodes = []
        for record, ret in zip(records, returns, strict=True):
            if record.status != "ok":
                failures[record.status] = failures.get(record.status, 0) + 1
            failure = record.failure
            cause = termination_of(record)
            terminations[cause] = terminations.get(cause, 0) + 1
            episode: dict[str, Any] = {
                "index": record.spec.index,
                "status": record.status,
                "return": ret,
                "length": record.steps,
                "terminated": record.terminated,
                "truncated": record.truncated,
                "termination": cause,
                "failure": None if failure is None else failure[:FAILURE_CHARS],
                # The end of what the policy printed: its author's own debugging channel.
                "output_tail": record.stderr_tail[-OUTPUT_CHARS:],
            }
            fields = _domain_fields(record)
            if fields:
                episode["summary"] = fields
            episodes.append(episode)
        mean = statistics.fmean(returns) if returns else 0.0
        content: dict[str, Any] = {
            "episodes": episodes,
            "mean_return": mean,
            "std_return": statistics.pstdev(returns) if returns else 0.0,
            "min_return": min(returns) if returns else 0.0,
            "max_return": max(returns) if returns else 0.0,
            "mean_length": statistics.fmean(r.steps for r in records) if records else 0.0,
            "failures": failures,
            "terminations": dict(sorted(terminations.items())),
            "failure_score": floor,
            # Completed Episodes whose return fell under the failure score (scored at it).
            "below_failure_score": below,
        }
        domain = domain_summary(records)
        if domain:
            content["domain"] = domain
        if self.success_threshold is not None:
            hits = sum(1 for r in returns if r >= self.success_threshold)
            content["success_rate"] = hits / len(returns) if returns else 0.0
        if self.catalog is not None and not self.catalog.deterministic:
            content["deterministic"] = False  # replaying an Episode need not give the same return
        trace = _trace_artifact(records)
        return Feedback(score=mean, content=content, artifacts=(trace,) if trace else ())


def termination_of(record: EpisodeRecord) -> str:
    """Why an Episode ended: ``policy_<status>`` when the policy failed, else what its
    Environment's summary says, else ``truncated`` / ``terminated``."""
    if record.status != "ok":
        return f"policy_{record.status}"
    cause = record.summary.get(SUMMARY_TERMINATION)
    if isinstance(cause, str) and cause:
        return cause
    if record.truncated:
        return "truncated"
    return "terminated" if record.terminated else "stopped"


def _domain_fields(record: EpisodeRecord) -> dict[str, Any]:
    return {k: v for k, v in record.summary.items() if k != SUMMARY_TERMINATION}


def domain_summary(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """The family's per-Episode fields over the completed Episodes: ``<field>_rate`` for a
    bool (the share of Episodes where it holds), ``mean_<field>`` for a number (over the
    Episodes where it is not None). Other values are left to the per-Episode rows."""
    flags: dict[str, list[bool]] = {}
    numbers: dict[str, list[float]] = {}
    for record in records:
        if record.status != "ok":
            continue
        for key, value in _domain_fields(record).items():
            if type(value) is bool:
                flags.setdefault(key, []).append(value)
            elif type(value) in (int, float) and math.isfinite(value):
                numbers.setdefault(key, []).append(float(value))
    out: dict[str, float] = {}
    for key, seen in sorted(flags.items()):
        out[f"{key}_rate"] = sum(seen) / len(seen)
    for key, values in sorted(numbers.items()):
        out[f"mean_{key}"] = statistics.fmean(values)
    return out


def _trace_default(value: Any) -> Any:
    if isinstance(value, TensorValue):
        value = tensor_to_array(value, writable=False)
    if isinstance(value, np.ndarray):
        if value.size > TRACE_ARRAY_ITEMS:
            return {"dtype": value.dtype.name, "shape": list(value.shape), "omitted": True}
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)


_TRACE_ENCODER = msgspec.json.Encoder(enc_hook=_trace_default)


def _trace_artifact(records: Sequence[EpisodeRecord]) -> Artifact | None:
    """The first steps of the first traced Episodes as JSON lines, bounded in size."""
    lines: list[bytes] = []
    size = 0
    traced = [r for r in records if r.trace][:TRACE_EPISODES]
    for record in traced:
        assert record.trace is not None
        for t, step in enumerate(record.trace[:TRACE_STEPS]):
            line = _TRACE_ENCODER.encode(
                {
                    "episode": record.spec.index,
                    "t": t,
                    "action": step.action,
                    "reward": step.reward,
                    "observation": step.observation,
                }
            )
            if size + len(line) + 1 > TRACE_BYTES:
                break
            lines.append(line)
            size += len(line) + 1
    if not lines:
        return None
    return Artifact(
        name="trace.jsonl",
        media_type="application/jsonl",
        data=b"\n".join(lines) + b"\n",
        retention="bulk",
    )


def _coerce(value: Any) -> Any:
    """CLI parameters arrive as strings: read JSON scalars (``true``, ``3``, ``0.5``) as such."""
    if type(value) is not str:
        return value
    try:
        decoded = msgspec.json.decode(value)
    except msgspec.DecodeError:
        return value
    return decoded if decoded is None or type(decoded) in (bool, int, float) else value


# The Benchmark's own parameters and the type each takes.
_BENCHMARK_PARAMETERS: dict[str, type] = {
    "max_episode_steps": int,
    "failure_return": float,
    "success_threshold": float,
}
_TYPE_NAMES = {"bool": bool, "int": int, "float": float}
_KIND = {bool: "true or false", int: "an integer", float: "a finite number"}


def _declared_type(parameter: inspect.Parameter, default: Any) -> type | None:
    """bool, int or float where the constructor says so (annotation, else default), else None.
    An int default alone does not rule out a float (``goal_velocity=0``): it asks for a number."""
    annotation = parameter.annotation
    if isinstance(annotation, str):
        annotation = _TYPE_NAMES.get(annotation.strip())
    if annotation in (bool, int, float):
        return annotation
    if type(default) is bool:
        return bool
    if type(default) in (int, float):
        return float
    return None


def _fits(value: Any, kind: type) -> bool:
    if kind is bool:
        return type(value) is bool
    if kind is int:
        return type(value) is int
    return type(value) in (int, float) and math.isfinite(value)


def _constructor_parameters(
    registered: Any,
) -> tuple[dict[str, tuple[type, Any]], set[str] | None, set[str]]:
    """What the environment's constructor says of its parameters: name -> (type, default)
    where known, the names it takes (None: any, or it cannot be inspected), and those whose
    annotation allows None."""
    try:
        signature = inspect.signature(load_env_creator(registered.entry_point))
    except Exception:  # an entry point that cannot be inspected is checked by gymnasium.make
        return {}, None, set()
    types: dict[str, tuple[type, Any]] = {}
    for name, parameter in signature.parameters.items():
        default = registered.kwargs.get(name, parameter.default)
        kind = _declared_type(parameter, None if default is inspect.Parameter.empty else default)
        if kind is not None:
            types[name] = (kind, default)
    kinds = {parameter.kind for parameter in signature.parameters.values()}
    names = None if inspect.Parameter.VAR_KEYWORD in kinds else set(signature.parameters)
    nullable = {
        name
        for name, parameter in signature.parameters.items()
        if parameter.annotation is not inspect.Parameter.empty
        and ("None" in str(parameter.annotation) or "Optional" in str(parameter.annotation))
    }
    return types, names, nullable


def _shown(value: Any) -> str:
    return (
        msgspec.json.encode(value).decode()
        if value is None or type(value) in (bool, int, float, str)
        else str(value)
    )


def _check_params(env_id: str, raw: dict[str, Any], coerced: dict[str, Any]) -> None:
    """A parameter the environment's constructor does not take, or whose type is known (the
    Benchmark's own, or the constructor's annotation or default) and the value does not read
    as: refused now, not when the Environment is made or at some step of an Episode."""
    known: dict[str, tuple[type, Any]] = {
        name: (kind, None) for name, kind in _BENCHMARK_PARAMETERS.items()
    }
    nullable: set[str] = set()
    if any(name not in known for name in coerced):
        types, names, nullable = _constructor_parameters(_lookup_spec(env_id))
        unknown = sorted(
            name
            for name in coerced
            if name not in known and names is not None and name not in names
        )
        if unknown and names is not None:
            takes = ", ".join([*sorted(names - {"render_mode"}), *known, "description"])
            given = " ".join(f"--param {name}={raw[name]}" for name in unknown)
            missing = ", ".join(repr(name) for name in unknown)
            raise BenchmarkError(
                f"gymnasium:{env_id} does not take {given}: it has no parameter {missing} (it takes {takes})"
            )
        known = {**types, **known}
    for name, value in coerced.items():
        if (
            name not in known
            or _fits(value, known[name][0])
            or (value is None and name in nullable)
        ):
            continue
        kind, default = known[name]
        said = (
            f" (default {_shown(default)})"
            if default not in (None, inspect.Parameter.empty)
            else ""
        )
        raise BenchmarkError(
            f"--param {name}={raw[name]}: gymnasium:{env_id} takes {_KIND[kind]} for {name}{said}"
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
    raw = params
    params = {k: _coerce(v) for k, v in params.items()}
    _check_params(env_id, raw, params)
    for key in ("max_episode_steps", "failure_return", "success_threshold"):
        if key in params:
            options[key] = params.pop(key)
    return GymnasiumBenchmark(env_id, make_kwargs=params, **options)

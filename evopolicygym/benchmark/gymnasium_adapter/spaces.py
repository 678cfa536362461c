"""Gymnasium spaces as PolicyValue descriptions, and deterministic draws from them."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["describe_space", "sample_space"]

# Larger Box bounds are written as one scalar when uniform (an image's 0 and 255), to keep
# the spec small.
UNIFORM_BOUNDS_ITEMS = 16


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
    # Without object addresses ("<function f at 0x7f...>"), so the spec is the same in every
    # process.
    return {"type": "other", "repr": re.sub(r" at 0x[0-9a-fA-F]+", "", str(space))}


def _bounds(array: np.ndarray[Any, Any]) -> Any:
    def finite(x: Any) -> Any:
        return x if not isinstance(x, float) or math.isfinite(x) else None

    if array.size > UNIFORM_BOUNDS_ITEMS and bool(np.all(array == array.flat[0])):
        return finite(array.flat[0].item())

    def walk(x: Any) -> Any:
        return [walk(v) for v in x] if isinstance(x, list) else finite(x)

    return walk(array.tolist())


def sample_space(space: spaces.Space[Any], rng: random.Random) -> Any:
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
        return tuple(sample_space(s, rng) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return {k: sample_space(s, rng) for k, s in space.spaces.items()}
    # Unknown space: its own sampler, reseeded from ``rng`` so the draw stays deterministic.
    space.seed(rng.getrandbits(63))
    return space.sample()

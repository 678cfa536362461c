"""What the rule templates need to know about the observation and action spaces.

Owns ``SpaceInfo`` and ``space_info``, which summarise the public space descriptions
(``{"type": "box", ...}``, ``{"type": "discrete", ...}``) into sizes, starts, bounds
and the observation scale the templates divide by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["HUGE_BOUND", "SpaceInfo", "space_info"]

# Box bounds beyond this are treated as unbounded (float32 max and friends).
HUGE_BOUND = 1e6


@dataclass(frozen=True)
class SpaceInfo:
    """What the templates need to know about the observation and action spaces."""

    observation_space: Any
    action_space: Any
    obs_kind: str  # "box", "discrete" or "other"
    obs_size: int = 0  # Box: number of components; Discrete: number of states
    obs_start: int = 0
    obs_low: tuple[float | None, ...] = ()
    obs_high: tuple[float | None, ...] = ()
    obs_scale: tuple[float, ...] = ()
    act_kind: str = "other"  # "box", "discrete" or "other"
    act_size: int = 0  # Box: components; Discrete: number of actions
    act_start: int = 0
    act_shape: tuple[int, ...] = ()
    act_low: tuple[float | None, ...] = ()
    act_high: tuple[float | None, ...] = ()


def _flat_bounds(value: Any, size: int) -> tuple[float | None, ...]:
    def walk(v: Any) -> list[Any]:
        if isinstance(v, list | tuple):
            return [x for item in v for x in walk(item)]
        return [v]

    items = [value] * size if not isinstance(value, list | tuple) else walk(value)
    if len(items) != size:
        items = [None] * size
    out: list[float | None] = []
    for item in items:
        if isinstance(item, int | float) and not isinstance(item, bool) and abs(item) < HUGE_BOUND:
            out.append(float(item))
        else:
            out.append(None)
    return tuple(out)


def _box(
    space: Any,
) -> tuple[int, tuple[int, ...], tuple[float | None, ...], tuple[float | None, ...]] | None:
    if not isinstance(space, dict) or space.get("type") != "box":
        return None
    shape = tuple(int(s) for s in space.get("shape") or ())
    size = math.prod(shape) if shape else 1
    return size, shape, _flat_bounds(space.get("low"), size), _flat_bounds(space.get("high"), size)


def space_info(observation_space: Any, action_space: Any) -> SpaceInfo:
    """Summarise two public space descriptions (``{"type": "box", ...}`` and so on)."""
    fields: dict[str, Any] = {"obs_kind": "other", "act_kind": "other"}
    box = _box(observation_space)
    if box is not None:
        size, _shape, low, high = box
        scale = []
        for lo, hi in zip(low, high, strict=True):
            half = (hi - lo) / 2 if lo is not None and hi is not None else None
            scale.append(float(f"{half:.4g}") if half and half > 0 else 1.0)
        fields.update(
            obs_kind="box", obs_size=size, obs_low=low, obs_high=high, obs_scale=tuple(scale)
        )
    elif isinstance(observation_space, dict) and observation_space.get("type") == "discrete":
        fields.update(
            obs_kind="discrete",
            obs_size=int(observation_space["n"]),
            obs_start=int(observation_space.get("start", 0)),
        )
    box = _box(action_space)
    if box is not None:
        size, shape, low, high = box
        fields.update(act_kind="box", act_size=size, act_shape=shape, act_low=low, act_high=high)
    elif isinstance(action_space, dict) and action_space.get("type") == "discrete":
        fields.update(
            act_kind="discrete",
            act_size=int(action_space["n"]),
            act_start=int(action_space.get("start", 0)),
        )
    return SpaceInfo(observation_space=observation_space, action_space=action_space, **fields)

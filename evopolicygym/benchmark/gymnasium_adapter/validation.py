"""Actions checked against a Gymnasium action space, compiled once per space: a validator
returns the action as the environment takes it, or raises InvalidAction; it never clips."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from evopolicygym.benchmark.contract import InvalidAction

__all__ = ["Validator", "make_validator"]

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


def make_validator(space: spaces.Space[Any]) -> Validator:
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
        parts = [make_validator(s) for s in space.spaces]

        def validate_tuple(action: Any) -> Any:
            if type(action) not in (tuple, list) or len(action) != len(parts):
                raise InvalidAction(f"action must be a sequence of {len(parts)} actions")
            return tuple(v(a) for v, a in zip(parts, action, strict=True))

        return validate_tuple
    if isinstance(space, spaces.Dict):
        fields = {k: make_validator(s) for k, s in space.spaces.items()}

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

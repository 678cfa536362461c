"""The parameters of ``gymnasium:<env id>``: CLI strings read as JSON scalars, and checked
against what the Benchmark and the environment's constructor take before anything is made."""

from __future__ import annotations

import inspect
import math
from typing import Any

import msgspec
from gymnasium.envs.registration import load_env_creator

from evopolicygym.benchmark.contract import BenchmarkError
from evopolicygym.benchmark.gymnasium_adapter.lookup import lookup_spec

__all__ = ["BENCHMARK_PARAMETERS", "checked_params", "shown"]


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
BENCHMARK_PARAMETERS: dict[str, type] = {
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


def shown(value: Any) -> str:
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
        name: (kind, None) for name, kind in BENCHMARK_PARAMETERS.items()
    }
    nullable: set[str] = set()
    if any(name not in known for name in coerced):
        types, names, nullable = _constructor_parameters(lookup_spec(env_id))
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
                f"gymnasium:{env_id} does not take {given}: it has no parameter {missing} "
                f"(it takes {takes})"
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
            f" (default {shown(default)})" if default not in (None, inspect.Parameter.empty) else ""
        )
        raise BenchmarkError(
            f"--param {name}={raw[name]}: gymnasium:{env_id} takes {_KIND[kind]} for {name}{said}"
        )


def checked_params(env_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with string values that read as JSON scalars made those scalars, each
    checked against what ``gymnasium:<env_id>`` takes (see ``_check_params``)."""
    coerced = {k: _coerce(v) for k, v in params.items()}
    _check_params(env_id, params, coerced)
    return coerced

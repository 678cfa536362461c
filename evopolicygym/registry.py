"""Benchmark discovery through the ``evopolicygym.benchmarks`` entry-point group.

The kernel never imports a concrete Benchmark: a package registers a factory
under a name, and ``load_benchmark("name")`` or ``load_benchmark("name:arg")``
calls it (``gymnasium:CartPole-v1`` passes ``CartPole-v1`` to the ``gymnasium``
factory). Keyword parameters come from ``--param key=value`` on the CLI.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, PackageNotFoundError, entry_points, metadata
from pathlib import Path
from typing import Any

from evopolicygym.benchmark import Benchmark

__all__ = ["BenchmarkParameterError", "UnknownBenchmark", "baseline_dir", "benchmark_names", "load_benchmark"]

GROUP = "evopolicygym.benchmarks"
# Extras that install a store or an executor, not Benchmarks.
_NOT_FAMILIES = frozenset({"postgres", "ray"})


class UnknownBenchmark(LookupError):
    """No registered factory has that name."""


class BenchmarkParameterError(ValueError):
    """The factory does not take the given argument or parameters."""


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def benchmark_names() -> list[str]:
    """Registered names; ``gymnasium`` is a family that takes an environment id after a colon."""
    return sorted(_entry_points())


def load_benchmark(ref: str, params: Mapping[str, Any] | None = None) -> Benchmark:
    """Build the Benchmark named by ``ref`` (``name`` or ``name:argument``)."""
    name, _, argument = ref.partition(":")
    found = _entry_points().get(name)
    if found is None:
        known = ", ".join(benchmark_names()) or "none"
        raise UnknownBenchmark(f"unknown benchmark {ref!r} (registered: {known}){_family_hint()}")
    factory: Callable[..., Benchmark] = found.load()
    args = (argument,) if argument else ()
    kwargs = dict(params or {})
    try:
        # Checked against the signature, so a TypeError inside a factory stays a bug, not a user error.
        inspect.signature(factory).bind(*args, **kwargs)
    except TypeError as exc:
        usage = f"{name}:<argument>" if _takes_argument(factory) and not argument else ref
        raise BenchmarkParameterError(f"{usage}: invalid parameters ({exc})") from None
    return factory(*args, **kwargs)


def _family_hint() -> str:
    """Where more Benchmarks come from: the families this distribution offers as extras."""
    try:
        extras = metadata("evopolicygym").get_all("Provides-Extra") or []
    except PackageNotFoundError:
        return ""
    families = [extra for extra in extras if extra not in _NOT_FAMILIES]
    if not families:
        return ""
    first, *others = families
    also = f" (also {', '.join(others)}, or --all-extras)" if others else " (or --all-extras)"
    return f"; more install as families: uv sync --extra {first}{also}"


def _takes_argument(factory: Callable[..., Any]) -> bool:
    params = list(inspect.signature(factory).parameters.values())
    return bool(params) and params[0].default is inspect.Parameter.empty and params[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


def baseline_dir(benchmark: Benchmark) -> Path | None:
    """The packaged baseline program of a Benchmark, when it ships one."""
    getter = getattr(benchmark, "baseline_dir", None)
    path = getter() if callable(getter) else None
    return Path(path) if path else None

"""Benchmark discovery through the ``evopolicygym.benchmarks`` entry-point group.

The kernel never imports a concrete Benchmark: a package registers a factory
under a name, and ``load_benchmark("name")`` or ``load_benchmark("name:arg")``
calls it (``gymnasium:CartPole-v1`` passes ``CartPole-v1`` to the ``gymnasium``
factory). Keyword parameters come from ``--param key=value`` on the CLI.

A name no installed family registers is one line of error: for an id of the catalog, the
family missing and the command installing it; otherwise the nearest known id ("did you
mean"), installed or not.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from evopolicygym.benchmark import (
    TASKS,
    Benchmark,
    family_installed,
    family_of_distribution,
    install_command,
    install_hint,
)

__all__ = [
    "BenchmarkNotInstalled",
    "BenchmarkParameterError",
    "UnknownBenchmark",
    "baseline_dir",
    "benchmark_names",
    "known_benchmark_names",
    "load_benchmark",
]

GROUP = "evopolicygym.benchmarks"


class UnknownBenchmark(LookupError):
    """No registered factory has that name."""


class BenchmarkNotInstalled(UnknownBenchmark):
    """The catalog knows the name, but the family providing it is not installed (or does
    not import): the message says which and the command installing it."""


class BenchmarkParameterError(ValueError):
    """The factory does not take the given argument or parameters."""


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def benchmark_names() -> list[str]:
    """Registered names; ``gymnasium`` is a family that takes an environment id after a colon."""
    return sorted(_entry_points())


def known_benchmark_names() -> list[str]:
    """Registered names and the catalog's (every family's ids), installed or not."""
    return sorted(set(_entry_points()) | set(TASKS))


def load_benchmark(ref: str, params: Mapping[str, Any] | None = None) -> Benchmark:
    """Build the Benchmark named by ``ref`` (``name`` or ``name:argument``)."""
    name, _, argument = ref.partition(":")
    found = _entry_points().get(name)
    if found is None:
        raise _unknown(ref, name, argument)
    try:
        factory: Callable[..., Benchmark] = found.load()
    except ImportError as exc:
        # An installed family whose own dependencies do not import (a wheel missing for
        # this platform, a half-finished install): the user's environment, not a bug.
        raise BenchmarkNotInstalled(_unimportable(name, found, exc)) from exc
    args = (argument,) if argument else ()
    kwargs = dict(params or {})
    try:
        # Checked against the signature, so a TypeError inside a factory stays a bug, not a user
        # error.
        inspect.signature(factory).bind(*args, **kwargs)
    except TypeError as exc:
        usage = f"{name}:<argument>" if _takes_argument(factory) and not argument else ref
        raise BenchmarkParameterError(f"{usage}: invalid parameters ({exc})") from None
    return factory(*args, **kwargs)


def _unknown(ref: str, name: str, argument: str) -> UnknownBenchmark:
    """The one-line error for a name no installed family registers: the extra installing
    it where the catalog knows it, else the nearest known id, else the known ids."""
    task = TASKS.get(name)
    if task is not None:
        family = task.family
        if family_installed(family):
            return BenchmarkNotInstalled(
                f"benchmark {name!r} ({family} family): {install_hint(family)}"
            )
        return BenchmarkNotInstalled(
            f"benchmark {name!r} needs the {family} family, which is not installed: "
            f"{install_hint(family)}"
        )
    known = known_benchmark_names()
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        suggestion = f"{close[0]}:{argument}" if argument else close[0]
        return UnknownBenchmark(f"unknown benchmark {ref!r}; did you mean {suggestion!r}?")
    return UnknownBenchmark(
        f"unknown benchmark {ref!r} (known: {', '.join(known)}; "
        "'evopolicy benchmarks list' says which are installed)"
    )


def _unimportable(name: str, found: EntryPoint, exc: ImportError) -> str:
    dist = found.dist.name if found.dist is not None else None
    task = TASKS.get(name)
    family = task.family if task is not None else family_of_distribution(dist) if dist else None
    command = install_command(family) if family is not None else None
    where = f"the {family} family" if family is not None else (dist or "its distribution")
    again = f": {command}" if command else ""
    return f"benchmark {name!r} cannot be imported ({exc}); reinstall {where}{again}"


def _takes_argument(factory: Callable[..., Any]) -> bool:
    params = list(inspect.signature(factory).parameters.values())
    return (
        bool(params)
        and params[0].default is inspect.Parameter.empty
        and params[0].kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    )


def baseline_dir(benchmark: Benchmark) -> Path | None:
    """The packaged baseline program of a Benchmark, when it ships one."""
    getter = getattr(benchmark, "baseline_dir", None)
    path = getter() if callable(getter) else None
    return Path(path) if path else None

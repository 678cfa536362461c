"""Benchmarks as commands load them: a family name or bad parameters is a user error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from evopolicygym.cli.errors import CliError

if TYPE_CHECKING:
    from evopolicygym.benchmark import Benchmark
    from evopolicygym.evaluation import PlannedEpisode

__all__ = ["FAMILIES", "load", "plan"]

# Families take an argument after a colon, so there is no single Benchmark to build and describe.
FAMILIES = {
    "gymnasium": (
        "Any Gymnasium environment: use gymnasium:<EnvId> (e.g. gymnasium:CartPole-v1); "
        "--param key=value is passed to gymnasium.make"
    ),
}


def load(ref: str, params: Mapping[str, str]) -> Benchmark:
    """The Benchmark ``ref``; a factory rejecting its parameters is a user error."""
    from evopolicygym.registry import load_benchmark

    name, _colon, argument = ref.partition(":")
    if name in FAMILIES and not argument.strip():
        raise CliError(f"{name} is a family of Benchmarks: use {name}:<id>")
    try:
        benchmark = load_benchmark(ref, params)
        if params:
            _ = benchmark.spec  # a lazy adapter makes its Environment here, meeting the parameters
        return benchmark
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    except TypeError as exc:
        # A factory handing --param on as keyword arguments (gymnasium.make) meets a name
        # its constructor does not take; without --param it is a bug, not the user's.
        if not params:
            raise
        given = ", ".join(f"{key}={value}" for key, value in params.items())
        raise CliError(f"{ref} does not take --param {given}: {exc}") from exc


def plan(benchmark: Benchmark, split: str, seed: int, count: int) -> list[PlannedEpisode]:
    from evopolicygym.evaluation import plan_episodes

    try:
        return plan_episodes(benchmark, split, seed, count)
    except ValueError as exc:
        raise CliError(str(exc)) from exc

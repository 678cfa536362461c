"""What the Benchmark families' test files share: skip (or, where CI requires every extra,
fail) when a family is not installed; one Evaluator per test module; evaluate a program on
a Catalog Benchmark's assessment split; the Benchmark's baseline program."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import baseline_dir, load_benchmark
from tests.support.requires import require_extra

__all__ = ["baseline", "family_run", "require_family", "shared_evaluator"]


def require_family(family: str, *modules: str) -> None:
    """Skip the calling test module when ``evopolicygym_<family>`` (or one of ``modules``)
    is not importable, or fail it when ``EVOPOLICY_REQUIRE_EXTRAS=1``."""
    require_extra(family, f"evopolicygym_{family}", *modules)


@pytest.fixture(scope="module", name="evaluator")
def shared_evaluator() -> Iterator[Evaluator]:
    """One Evaluator (one fork server) for a test module's evaluations."""
    with Evaluator() as shared:
        yield shared


def family_run(
    evaluator: Evaluator,
    name: str,
    program_dir: Path,
    episodes: int,
    split: str = "assessment",
    trace_steps: int = 0,
    **params: Any,
) -> EvaluationResult:
    """``program_dir`` on the first ``episodes`` Episodes of Benchmark ``name``'s ``split``
    (seed 0, one job), with ``params`` as ``--param`` gives them."""
    benchmark = load_benchmark(name, {k: str(v) for k, v in params.items()})
    config = EvaluationConfig(
        split=split, episodes=episodes, seed=0, jobs=1, trace_steps=trace_steps
    )
    return evaluator.evaluate(Program.from_directory(program_dir), benchmark, config)


def baseline(name: str) -> Path:
    """The directory of Benchmark ``name``'s baseline program."""
    found = baseline_dir(load_benchmark(name))
    assert found is not None
    return found

"""The Box2D family: LunarLander, and Core16's ``bipedal`` (BipedalWalker) and ``racing``
(CarRacing from pixels), each curated with a failure score, domain Feedback (why an Episode
ended and the family's fields), difficulty profiles where the environment has them, and a
baseline program.

Its factories are ``evopolicygym.benchmarks`` entry points (this distribution's
pyproject.toml names them); it installs the Box2D wheel it needs (``box2d`` 2.3.10,
which builds without swig), as ``uv sync --extra box2d`` from the project root.
"""

from __future__ import annotations

from pathlib import Path

from evopolicygym.benchmark import BenchmarkError, CatalogEntry, EpisodeEnd, GymnasiumBenchmark
from evopolicygym_box2d.filmstrip import png_strip
from evopolicygym_box2d.tasks import (
    BIPEDAL_PROFILES,
    FRAMES_ARTIFACT,
    RACING_PROFILES,
    RacingBenchmark,
    RacingTracker,
    WalkerTracker,
    bipedal,
    racing,
)

__all__ = [
    "BASELINES_DIR",
    "BIPEDAL_PROFILES",
    "FRAMES_ARTIFACT",
    "RACING_PROFILES",
    "RacingBenchmark",
    "RacingTracker",
    "WalkerTracker",
    "bipedal",
    "lunar_lander",
    "png_strip",
    "racing",
]

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"


def _landed_or_crashed(end: EpisodeEnd) -> str:
    """LunarLander ends an Episode with +100 when the lander comes to rest and -100 when it
    crashes or flies off the screen; the last step's shaping is small beside either."""
    if end.terminated:
        return "landed" if end.reward > 0 else "crashed"
    return "truncated" if end.truncated else "stopped"


def lunar_lander() -> GymnasiumBenchmark:
    try:
        import Box2D  # noqa: F401
    except ImportError as exc:
        raise BenchmarkError("lunar-lander needs the box2d extra: uv sync --extra box2d") from exc
    return GymnasiumBenchmark(
        "LunarLander-v3",
        benchmark_id="lunar-lander",
        description="Land the lunar module softly on the pad with four discrete engine actions.",
        failure_return=-500.0,
        success_threshold=200.0,
        baseline=str(BASELINES_DIR / "lunar-lander"),
        catalog=CatalogEntry(family="box2d"),
        termination=_landed_or_crashed,
    )

"""Rows of the `rl` export config for the training environment's tests and benchmarks."""

from __future__ import annotations

from typing import Any

from evopolicygym.program import Program
from evopolicygym.registry import baseline_dir, load_benchmark

__all__ = ["cartpole_row"]


def cartpole_row(budget: int = 4, **extra: Any) -> dict[str, Any]:
    """A row of the `rl` config as the exporter writes it (the columns reset reads)."""
    benchmark = load_benchmark("cartpole")
    program = Program.from_directory(baseline_dir(benchmark))
    return {
        "task_id": "sha256:" + "ab" * 32,
        "prompt": [
            {"role": "system", "content": "an older task text"},
            {"role": "user", "content": "Improve the policy."},
        ],
        "benchmark_id": "cartpole",
        "benchmark_params": {},
        "environment_digest": benchmark.spec.environment_digest,
        "initial_program_digest": program.digest,
        "initial_program": [
            {"path": path, "content": data.decode(), "size": len(data)}
            for path, data in program.files
        ],
        "budget": {"episode_budget": budget, "max_candidates": 2},
        "train_split": "train",
        **extra,
    }

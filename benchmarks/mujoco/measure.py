"""Measure the MuJoCo family's reference scores: ``uv run python benchmarks/mujoco/measure.py
[ID ...] [--episodes N] [--jobs J] [--profile NAME]`` runs each task's baseline and the
kernel's uniform-random program with ``evaluate()`` on the same assessment Episodes (seed 0)
and prints both scores, the Episodes' terminations, the family's domain means and the steps
a second; the figures in ``tasks.py`` were measured with it (32 Episodes, the default
profile).

A tool beside the distribution, not in it: a family imports only the authoring interface,
and this drives evaluate() as the Host does."""

from __future__ import annotations

import argparse
import time

from evopolicygym.benchmark import RANDOM_POLICY_DIR
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym_mujoco.tasks import DEFAULT_PROFILE, FACTORIES

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/mujoco/measure.py")
    parser.add_argument("ids", nargs="*", metavar="ID", help=f"of {', '.join(FACTORIES)} (default: all)")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--profile", default=DEFAULT_PROFILE)
    args = parser.parse_args(argv)
    unknown = [name for name in args.ids if name not in FACTORIES]
    if unknown:
        parser.error(f"unknown id {unknown[0]!r} (the family's: {', '.join(FACTORIES)})")
    with Evaluator() as evaluator:
        for name in args.ids or list(FACTORIES):
            benchmark = FACTORIES[name](profile=args.profile)
            config = EvaluationConfig(
                split="assessment", seed=0, episodes=args.episodes, jobs=args.jobs, trace_steps=0
            )
            row = [f"{name}/{args.profile}"]
            for label, directory in (("baseline", benchmark.baseline_dir()), ("random", RANDOM_POLICY_DIR)):
                assert directory is not None
                start = time.perf_counter()
                result = evaluator.evaluate(Program.from_directory(directory), benchmark, config)
                took = time.perf_counter() - start
                steps = sum(r.steps for r in result.records)
                content = result.feedback.content
                domain = {k: round(v, 3) for k, v in content.get("domain", {}).items()}
                row.append(
                    f"{label} {result.feedback.score:.4f} (failures {result.failures}, "
                    f"{content['terminations']}, {domain}, {steps / took:.0f} steps/s)"
                )
            print("  ".join(row), flush=True)


if __name__ == "__main__":
    main()

"""Measure the driving family's reference scores: ``python -m evopolicygym_driving.measure
TASK [--profile NAME] [--episodes N] [--jobs J]`` runs the task's baseline and the kernel's
uniform-random program with ``evaluate()`` on the same assessment Episodes (seed 0) and
prints both scores, the Episodes' terminations, the family's summary and the steps a
second; the figures in ``tasks.py`` were measured with it."""

from __future__ import annotations

import argparse
import time

from evopolicygym.benchmark import RANDOM_POLICY_DIR
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym_driving import tasks

__all__ = ["main"]

TASKS = ("parking", "roundabout")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evopolicygym_driving.measure")
    parser.add_argument("task", choices=TASKS)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    benchmark = getattr(tasks, args.task)(profile=args.profile)
    config = EvaluationConfig(split="assessment", seed=0, episodes=args.episodes, jobs=args.jobs, trace_steps=0)
    with Evaluator() as evaluator:
        for label, directory in (("baseline", benchmark.baseline_dir()), ("random", RANDOM_POLICY_DIR)):
            assert directory is not None
            start = time.perf_counter()
            result = evaluator.evaluate(Program.from_directory(directory), benchmark, config)
            took = time.perf_counter() - start
            steps = sum(r.steps for r in result.records)
            content = result.feedback.content
            print(
                f"{args.task}/{benchmark.catalog.profile if benchmark.catalog else '-'} {label} "
                f"{result.feedback.score:.4f} (failures {result.failures}, {content['terminations']}, "
                f"{content['domain']}, {steps / took:.0f} steps/s)",
                flush=True,
            )


if __name__ == "__main__":
    main()

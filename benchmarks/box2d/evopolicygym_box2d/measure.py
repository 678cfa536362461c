"""Measure the Box2D family's reference scores: ``python -m evopolicygym_box2d.measure
[bipedal|racing] [--episodes N] [--jobs J]`` runs each profile's baseline and the kernel's
uniform-random program with ``evaluate()`` on the same assessment Episodes (seed 0) and
prints both scores, the Episodes' terminations and the steps a second; the figures in
``tasks.py`` were measured with it."""

from __future__ import annotations

import argparse
import time

from evopolicygym.benchmark import RANDOM_POLICY_DIR
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym_box2d.tasks import BIPEDAL_PROFILES, RACING_PROFILES, bipedal, racing

__all__ = ["main"]

DEFAULT_EPISODES = {"bipedal": 32, "racing": 8}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evopolicygym_box2d.measure")
    parser.add_argument("task", choices=("bipedal", "racing"))
    parser.add_argument("--episodes", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    factory, profiles = (bipedal, BIPEDAL_PROFILES) if args.task == "bipedal" else (racing, RACING_PROFILES)
    episodes = args.episodes or DEFAULT_EPISODES[args.task]
    names = [args.profile] if args.profile else [p.name for p in profiles]
    with Evaluator() as evaluator:
        for name in names:
            benchmark = factory(profile=name)
            config = EvaluationConfig(split="assessment", seed=0, episodes=episodes, jobs=args.jobs, trace_steps=0)
            row = [f"{args.task}/{name}"]
            for label, directory in (("baseline", benchmark.baseline_dir()), ("random", RANDOM_POLICY_DIR)):
                assert directory is not None
                start = time.perf_counter()
                result = evaluator.evaluate(Program.from_directory(directory), benchmark, config)
                took = time.perf_counter() - start
                steps = sum(r.steps for r in result.records)
                content = result.feedback.content
                row.append(
                    f"{label} {result.feedback.score:.2f} (failures {result.failures}, "
                    f"{content['terminations']}, {steps / took:.0f} steps/s)"
                )
            print("  ".join(row), flush=True)


if __name__ == "__main__":
    main()

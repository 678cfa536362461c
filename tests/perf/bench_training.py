"""What a training rollout costs on top of the Episodes it plays.

Prints, from one run on this machine (CartPole, one evaluation process):
- ``evaluate`` alone: the same single-Episode evaluations a rollout's submissions make, on a
  warm Evaluator (the baseline, measured in this run);
- ``PolicyEvolutionEnv``: ``reset`` (create the Run, start its Host, publish the workspace),
  a file tool call, ``submit`` of one Episode (the ratio to the bare evaluation), and
  ``get_reward`` (Validation and Assessment, plus the reward's reference Episodes the first
  time a task and seed are seen) against the bare evaluations of the same Episodes;
- whole rollouts per second, the first of a group and the ones after it.

Usage: uv run python tests/perf/bench_training.py [--rollouts N] [--submissions K]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evopolicygym.benchmark import RANDOM_POLICY_DIR
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run.pool import planned_split
from evopolicygym.training import PolicyEvolutionEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.training import cartpole_row

VALIDATION, ASSESSMENT = 4, 8


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms"


def bare(submissions: int) -> tuple[float, float]:
    """Seconds per single-Episode evaluation, and for one rollout's held-out Episodes (the
    candidate and the reference on Validation, the selected on Assessment, I and R)."""
    benchmark = load_benchmark("cartpole")
    directory = baseline_dir(benchmark)
    assert directory is not None
    program = Program.from_directory(directory)
    one = EvaluationConfig(episodes=1, jobs=1, trace_steps=0)
    with Evaluator() as evaluator:
        evaluator.evaluate(program, benchmark, one)
        singles = []
        for i in range(submissions):
            started = time.perf_counter()
            evaluator.evaluate(
                program, benchmark, one, episodes=planned_split(benchmark, "train", i, 1)
            )
            singles.append(time.perf_counter() - started)
        started = time.perf_counter()
        for split, count, programs in (
            ("validation", VALIDATION, 2),
            ("assessment", ASSESSMENT, 1),
            ("assessment", ASSESSMENT, 1),
        ):
            for _ in range(programs):
                evaluator.evaluate(
                    program,
                    benchmark,
                    EvaluationConfig(split=split, episodes=count, jobs=1, trace_steps=0),
                    episodes=planned_split(benchmark, split, 7, count),
                )
        evaluator.evaluate(
            Program.from_directory(RANDOM_POLICY_DIR),
            benchmark,
            EvaluationConfig(split="assessment", episodes=ASSESSMENT, jobs=1, trace_steps=0),
            episodes=planned_split(benchmark, "assessment", 7, ASSESSMENT),
        )
        held_out = time.perf_counter() - started
    return statistics.median(singles), held_out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=6)
    parser.add_argument("--submissions", type=int, default=4)
    args = parser.parse_args()
    single, held_out = bare(args.submissions)
    resets, tools, submits, rewards, totals = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = PolicyEvolutionEnv(
            store=Path(tmp, "store"),
            validation_episodes=VALIDATION,
            assessment_episodes=ASSESSMENT,
            jobs=1,
        )
        row = cartpole_row(budget=args.submissions)
        for _ in range(args.rollouts):
            begun = started = time.perf_counter()
            env.reset(**row)
            resets.append(time.perf_counter() - started)
            started = time.perf_counter()
            env.read_file("program/policy.py")
            tools.append(time.perf_counter() - started)
            for i in range(args.submissions):
                started = time.perf_counter()
                env.submit(str(i))
                submits.append(time.perf_counter() - started)
            env.finish([1])
            started = time.perf_counter()
            env.get_reward()
            rewards.append(time.perf_counter() - started)
            totals.append(time.perf_counter() - begun)
    print(f"evaluate alone, 1 Episode        {single * 1000:8.1f} ms")
    print(f"held-out Episodes alone          {held_out * 1000:8.1f} ms  (first of a group)")
    print(f"reset                            {_ms(resets)}")
    print(f"read_file                        {_ms(tools)}")
    print(
        f"submit, 1 Episode                {_ms(submits)}  "
        f"{statistics.median(submits) / single:5.2f}x evaluate alone"
    )
    print(
        f"get_reward, first of a group     {rewards[0] * 1000:8.1f} ms  "
        f"{rewards[0] / held_out:5.2f}x its Episodes alone"
    )
    later = rewards[1:] or rewards
    print(f"get_reward, later in the group   {_ms(later)}")
    print(
        f"rollouts per second (after the first): {1 / statistics.median(totals[1:] or totals):.2f}"
    )


if __name__ == "__main__":
    main()

"""The catalog's Benchmarks: evaluate() against the raw in-process loop, measured in one run.

For each installed Benchmark of a suite (default core16) it prints: steps/s of the raw loop
(the Benchmark's own Environment and its baseline program imported in-process, no policy
process, no wire), steps/s of evaluate() with one job on the same assessment Episodes, their
ratio, and the fixed cost of an Episode (evaluate() of Episodes cut after their first step:
a policy process, the Environment made and reset, scoring). Last, the wall time of the
whole `benchmarks check --suite` equivalent (conformance, baseline and random, N Episodes).
Run: uv run python tests/perf/bench_catalog.py [--episodes 4] [--suite core16]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path
from typing import Any

from evopolicygym.benchmark import (
    RANDOM_POLICY_DIR,
    SUITES,
    Benchmark,
    FirstStepOnly,
    check_benchmark,
)
from evopolicygym.evaluation import EvaluationConfig, Evaluator, plan_episodes
from evopolicygym.policy import PolicyContext
from evopolicygym.program import Program
from evopolicygym.registry import baseline_dir, benchmark_names, load_benchmark


def load_policy_module(program_dir: Path) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"policy_{abs(hash(program_dir))}", program_dir / "policy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raw_loop(benchmark: Benchmark, program_dir: Path, episodes: int) -> tuple[int, float]:
    """Steps and seconds of the baseline played in-process on the assessment Episodes."""
    module = load_policy_module(program_dir)
    spec = benchmark.spec
    steps = 0
    seconds = 0.0
    for planned in plan_episodes(benchmark, "assessment", 0, episodes):
        random.seed(planned.policy_seed)
        context = PolicyContext(
            observation_space=spec.observation_space,
            action_space=spec.action_space,
            policy_seed=planned.policy_seed,
            metadata=dict(spec.metadata),
            environment_parameters=dict(spec.environment_parameters),
        )
        started = time.perf_counter()
        env = benchmark.make_environment(planned.spec)
        observation = env.reset()
        policy = module.make_policy(context)
        for _ in range(spec.max_episode_steps):
            result = env.step(benchmark.validate_action(policy.act(observation)))
            steps += 1
            observation = result.observation
            if result.terminated or result.truncated:
                break
        env.close()
        seconds += time.perf_counter() - started
    return steps, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="core16", choices=sorted(SUITES))
    parser.add_argument("--episodes", type=int, default=4)
    args = parser.parse_args()
    registered = set(benchmark_names())
    config = EvaluationConfig(
        split="assessment", episodes=args.episodes, seed=0, jobs=1, trace_steps=0
    )
    header = (
        f"{'benchmark':26} {'raw st/s':>9} {'eval st/s':>9} {'ratio':>6} {'fixed ms':>8} "
        f"{'baseline':>9} {'random':>9}"
    )
    print(header)
    print("-" * len(header))
    check_started = time.perf_counter()
    with Evaluator() as evaluator:
        for member in SUITES[args.suite]:
            if member.id not in registered:
                print(f"{member.id:26} not installed")
                continue
            benchmark = load_benchmark(member.id)
            program_dir = baseline_dir(benchmark)
            assert program_dir is not None
            check_benchmark(benchmark)
            raw_steps, raw_s = raw_loop(benchmark, program_dir, args.episodes)
            ours = evaluator.evaluate(Program.from_directory(program_dir), benchmark, config)
            rand = evaluator.evaluate(Program.from_directory(RANDOM_POLICY_DIR), benchmark, config)
            first = evaluator.evaluate(
                Program.from_directory(RANDOM_POLICY_DIR), FirstStepOnly(benchmark), config
            )
            eval_steps = sum(e.steps for e in ours.episodes)
            eval_s = sum(e.duration_s for e in ours.episodes)
            raw_rate, eval_rate = raw_steps / raw_s, eval_steps / eval_s
            fixed_ms = 1000 * sum(e.duration_s for e in first.episodes) / len(first.episodes)
            print(
                f"{member.id:26} {raw_rate:9,.0f} {eval_rate:9,.0f} {eval_rate / raw_rate:6.2f} "
                f"{fixed_ms:8.1f} {ours.feedback.score:9.4g} {rand.feedback.score:9.4g}",
                flush=True,
            )
    print(
        f"\nwall time, raw loops included: {time.perf_counter() - check_started:.1f} s "
        f"({args.episodes} Episodes per Benchmark)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

"""The cost of a step in the long-horizon worlds: a contained Episode against the raw library
loop, measured in one run.

For each Benchmark given (default: nethack and crafter) it prints steps/s of the raw loop
(the library's own environment made in this process exactly as the Benchmark makes it: the
same id, keywords, wrappers and so observation keys, reset with the same Episode seeds, fed
uniform-random actions: no policy process, no wire, no tracker) and steps/s of evaluate()
with one job of the kernel's uniform-random program on the same assessment Episodes (a
policy process in its sandbox, every observation over the wire, the family's tracker), and
their ratio. Issue 29 holds the ratio at 0.5 or more.
Run: uv run python tests/perf/bench_long_horizon.py [--episodes 2] [--max-steps 3000] [ID ...]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium
import msgspec

from evopolicygym.benchmark import RANDOM_POLICY_DIR, Benchmark, GymnasiumBenchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator, plan_episodes
from evopolicygym.program import Program
from evopolicygym.registry import load_benchmark


def _library_env(benchmark: Benchmark) -> Any:
    """The environment as the library gives it, made as the Benchmark makes it."""
    if isinstance(benchmark, GymnasiumBenchmark):
        env = gymnasium.make(
            benchmark.env_id,
            max_episode_steps=benchmark.max_episode_steps,
            disable_env_checker=True,
            **benchmark.make_kwargs,
        )
        return env if benchmark.wrap is None else benchmark.wrap(env)
    raise SystemExit(f"{benchmark.spec.id}: not a Gymnasium Benchmark; no raw loop to compare")


def raw_loop(benchmark: Benchmark, episodes: int, max_steps: int) -> tuple[int, float]:
    """Steps and seconds of uniform-random actions in the library env, same Episode seeds."""
    steps, seconds = 0, 0.0
    for planned in plan_episodes(benchmark, "assessment", 0, episodes):
        env = _library_env(benchmark)
        env.action_space.seed(planned.policy_seed)
        started = time.perf_counter()
        env.reset(seed=planned.spec.seed)
        for _ in range(max_steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += 1
            if terminated or truncated:
                break
        seconds += time.perf_counter() - started
        env.close()
    return steps, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", default=["nethack", "crafter"])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=3000, help="step limit of both loops")
    args = parser.parse_args()
    header = f"{'benchmark':20} {'raw st/s':>9} {'eval st/s':>9} {'ratio':>6} {'steps':>7}"
    print(header)
    print("-" * len(header))
    config = EvaluationConfig(
        split="assessment", episodes=args.episodes, seed=0, jobs=1, trace_steps=0
    )
    with Evaluator() as evaluator:
        for name in args.ids:
            benchmark = load_benchmark(name)
            if isinstance(benchmark, GymnasiumBenchmark):
                # Both loops stop at the same step limit.
                benchmark.max_episode_steps = min(benchmark.max_episode_steps, args.max_steps)
                benchmark.spec = msgspec.structs.replace(
                    benchmark.spec, max_episode_steps=benchmark.max_episode_steps
                )
            raw_steps, raw_s = raw_loop(benchmark, args.episodes, args.max_steps)
            ours = evaluator.evaluate(Program.from_directory(RANDOM_POLICY_DIR), benchmark, config)
            eval_steps = sum(e.steps for e in ours.episodes)
            eval_s = sum(e.duration_s for e in ours.episodes)
            raw_rate, eval_rate = raw_steps / raw_s, eval_steps / eval_s
            print(
                f"{name:20} {raw_rate:9,.0f} {eval_rate:9,.0f} {eval_rate / raw_rate:6.2f} "
                f"{eval_steps:7d}",
                flush=True,
            )


if __name__ == "__main__":
    main()

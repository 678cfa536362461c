"""Evaluation throughput against the raw in-process Gymnasium loop, measured in one run.

Prints: raw CartPole steps/s with the baseline rule in-process; evaluate() steps/s
at jobs=1 and jobs=2; their ratios; and the fixed cost per Episode (a policy whose
Episodes end after a few steps). Targets: jobs=1 >= 0.25 of raw; fixed cost <= 5 ms;
jobs=2 >= 1.8x jobs=1 on 2 cores. Run: uv run python tests/perf/bench_evaluate.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import gymnasium as gym

from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym_classic import cartpole

RULE = "1 if obs[2] + 0.5 * obs[3] > 0 else 0"
POLICY = f"""
class Policy:
    def act(self, obs):
        return {RULE}

def make_policy(context):
    return Policy()
"""
# Pushes one way only: CartPole fails in about ten steps, so per-Episode costs dominate.
SHORT = """
class Policy:
    def act(self, obs):
        return 1

def make_policy(context):
    return Policy()
"""


def raw_loop(steps: int) -> float:
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    done = 0
    started = time.perf_counter()
    while done < steps:
        action = 1 if obs[2] + 0.5 * obs[3] > 0 else 0
        obs, _, terminated, truncated, _ = env.step(action)
        done += 1
        if terminated or truncated:
            obs, _ = env.reset()
    return done / (time.perf_counter() - started)


def program(source: str) -> Program:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "policy.py").write_text(source)
        return Program.from_directory(tmp)


def measure(evaluator: Evaluator, prog: Program, episodes: int, jobs: int) -> tuple[float, float, int]:
    config = EvaluationConfig(episodes=episodes, jobs=jobs, trace_steps=0, seed=1)
    evaluator.evaluate(prog, cartpole(), EvaluationConfig(episodes=jobs, jobs=jobs, trace_steps=0))  # warm up
    started = time.perf_counter()
    result = evaluator.evaluate(prog, cartpole(), config)
    elapsed = time.perf_counter() - started
    steps = sum(e.steps for e in result.episodes)
    assert result.failures == 0, [e.failure for e in result.episodes if e.failure]
    return steps / elapsed, elapsed, steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--short-episodes", type=int, default=200)
    args = parser.parse_args()
    raw = raw_loop(100_000)
    with Evaluator() as evaluator:
        one, _, steps1 = measure(evaluator, program(POLICY), args.episodes, 1)
        two, _, _ = measure(evaluator, program(POLICY), args.episodes, 2)
        _, short_elapsed, short_steps = measure(evaluator, program(SHORT), args.short_episodes, 1)
        containment = evaluator.fork_server.containment
        enforced = ", ".join(evaluator.fork_server.enforced)
    # Fixed cost: wall time per short Episode minus its steps at the jobs=1 step rate.
    fixed_ms = (short_elapsed - short_steps / one) / args.short_episodes * 1000
    def verdict(met: bool) -> str:
        return "met" if met else "MISSED"

    print(f"containment:                {containment} ({enforced})")
    print(f"raw in-process loop:        {raw:12,.0f} steps/s")
    print(f"evaluate() jobs=1:          {one:12,.0f} steps/s  ratio to raw {one / raw:.3f}  (target >= 0.25: {verdict(one / raw >= 0.25)})")
    print(f"evaluate() jobs=2:          {two:12,.0f} steps/s  ratio to jobs=1 {two / one:.2f}x  (target >= 1.8x: {verdict(two / one >= 1.8)})")
    print(f"fixed cost per Episode:     {fixed_ms:12.2f} ms  (target <= 5 ms: {verdict(fixed_ms <= 5)}; {args.short_episodes} Episodes of ~{short_steps / args.short_episodes:.0f} steps)")
    print(f"steps measured at jobs=1:   {steps1:12,}")


if __name__ == "__main__":
    main()

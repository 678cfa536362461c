"""The Ray executor's overhead: a Validation on 2 local Ray workers against the local executor
with jobs=2, measured in one run.

The Validation: 4 candidate Programs (the CartPole baseline rule with four gains) x 64
Episodes of the validation split each, evaluated one after another as a Run's Host does.
Both executors are warmed first (the local one's runner processes and fork server, the Ray
one's actors), so what is compared is the steady state of a Run; the Ray workers' start is
printed apart. The two take turns for ``--rounds`` rounds and the best round of each is
compared (a shared machine's other work falls on both alike). Printed: seconds of each, their
ratio (local time over Ray time; target >= 0.8), and whether the records were the same.

Ray runs as a local instance of 2 CPUs started here (no dashboard), stopped at the end.

Run: uv run python tests/perf/bench_ray.py [--episodes 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import msgspec

from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator
from evopolicygym.program import Program
from evopolicygym.registry import load_benchmark

TARGET = 0.8
POLICY = """
class Policy:
    def act(self, obs):
        return 1 if obs[2] + {gain} * obs[3] > 0 else 0

def make_policy(context):
    return Policy()
"""
GAINS = (0.3, 0.5, 0.8, 1.2)


def program(gain: float) -> Program:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "policy.py").write_text(POLICY.format(gain=gain))
        return Program.from_directory(tmp)


def validation(
    evaluator: Evaluator, candidates: list[Program], episodes: int
) -> tuple[float, list[EvaluationResult]]:
    benchmark = load_benchmark("cartpole")
    config = EvaluationConfig(split="validation", episodes=episodes, seed=11, jobs=2, trace_steps=0)
    started = time.perf_counter()
    results = [evaluator.evaluate(candidate, benchmark, config) for candidate in candidates]
    return time.perf_counter() - started, results


def untimed(results: list[EvaluationResult]) -> list[bytes]:
    return [
        msgspec.msgpack.encode(
            [(e.index, e.status, e.total_reward, e.steps, e.failure) for e in r.episodes]
        )
        + msgspec.msgpack.encode(r.feedback.score)
        for r in results
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=64, help="Episodes per candidate")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # workers run this interpreter
    import ray

    from evopolicygym.evaluation import RayEvaluator

    candidates = [program(g) for g in GAINS]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    ray_start = time.perf_counter() - started
    try:
        with Evaluator() as local, RayEvaluator() as remote:
            warm = time.perf_counter()
            validation(remote, candidates[:1], 2)
            workers_start = time.perf_counter() - warm
            validation(local, candidates[:1], 2)
            local_times, ray_times = [], []
            same = True
            for _ in range(args.rounds):
                t_local, r_local = validation(local, candidates, args.episodes)
                t_ray, r_ray = validation(remote, candidates, args.episodes)
                local_times.append(t_local)
                ray_times.append(t_ray)
                same = same and untimed(r_local) == untimed(r_ray)
            steps = sum(e.steps for r in r_local for e in r.episodes)
            containment = r_ray[0].containment
    finally:
        ray.shutdown()
    best_local, best_ray = min(local_times), min(ray_times)
    ratio = best_local / best_ray
    verdict = "met" if ratio >= TARGET else "MISSED"
    episodes = len(candidates) * args.episodes
    print(f"load average before:          {load:.2f} (2-core machine)")
    print(f"containment (Ray workers):    {containment}")
    print(f"Ray local instance start:     {ray_start:8.2f} s (once per Host)")
    print(
        f"Ray workers' start:           {workers_start:8.2f} s "
        "(2 actors and their fork servers, once per Host)"
    )
    print(
        f"Validation {len(candidates)} x {args.episodes} Episodes ({steps:,} steps), "
        f"best of {args.rounds}:"
    )
    print(
        f"  local executor, jobs=2:     {best_local:8.2f} s  "
        f"({episodes / best_local:7.1f} Episodes/s)  "
        f"rounds {', '.join(f'{t:.2f}' for t in local_times)}"
    )
    print(
        f"  Ray executor, 2 workers:    {best_ray:8.2f} s  "
        f"({episodes / best_ray:7.1f} Episodes/s)  "
        f"rounds {', '.join(f'{t:.2f}' for t in ray_times)}"
    )
    print(f"  ratio local/Ray time:       {ratio:8.2f}    (target >= {TARGET}: {verdict})")
    print(f"  same records on both:       {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()

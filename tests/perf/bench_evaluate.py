"""Evaluation throughput, fixed cost and fan-out against the raw in-process loop, one run.

Every figure is a median of interleaved repetitions on 500-step CartPole Episodes with
the baseline-like rule, the policy in its own contained process, and is printed beside
its target and a verdict; the load average is read before each block.

- P1: steps/s of 20 Episodes at jobs=1 over the raw in-process Gymnasium loop's, warm
  (a kept Evaluator) and one-shot (evaluate(), its fork server's start-up included).
- P2: the fixed cost per Episode, from a policy whose Episodes fail after ~9 steps: wall
  time per Episode less its steps at the P1 step rate. Warm: an Evaluator's Episodes.
  One-shot: what each Episode after the first adds to an evaluate() call (its start-up,
  printed on its own row, is paid once per call).
- P3: wall of jobs=1 over wall of jobs=2 for 20 Episodes, warm, one-shot and through the
  CLI (``evopolicy evaluate DIR --benchmark cartpole``), and jobs=2 against jobs=1 at
  4 Episodes (never slower).

Run: uv run python tests/perf/bench_evaluate.py [--reps 3] [--no-cli]  (about a minute)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

from evopolicygym.evaluation import EvaluationConfig, Evaluator, evaluate
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


def write_program(directory: Path, source: str) -> Program:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policy.py").write_text(source)
    return Program.from_directory(directory)


def load() -> str:
    return (
        Path("/proc/loadavg").read_text().split(" ", 1)[0]
        if Path("/proc/loadavg").exists()
        else "?"
    )


def config(episodes: int, jobs: int) -> EvaluationConfig:
    return EvaluationConfig(episodes=episodes, jobs=jobs, trace_steps=0, seed=1)


def timed(run: Callable[[], object]) -> tuple[float, int]:
    started = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - started
    episodes = result.episodes  # type: ignore[attr-defined]
    assert all(e.failure is None for e in episodes), [e.failure for e in episodes if e.failure]
    return elapsed, sum(e.steps for e in episodes)


def interleaved(
    reps: int, **runs: Callable[[], tuple[float, int]]
) -> dict[str, list[tuple[float, int]]]:
    """Each run ``reps`` times, A/B/A/B, so a change of load hits them alike."""
    out: dict[str, list[tuple[float, int]]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            out[name].append(run())
    return out


def med_wall(samples: list[tuple[float, int]]) -> float:
    return statistics.median(s[0] for s in samples)


def med_rate(samples: list[tuple[float, int]]) -> float:
    return statistics.median(s[1] / s[0] for s in samples)


def med_ratio(a: list[tuple[float, int]], b: list[tuple[float, int]]) -> float:
    """Median over repetitions of a's wall over b's (each pair ran side by side)."""
    return statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))


def row(name: str, figure: str, target: str, met: bool | None, at_load: str) -> None:
    verdict = "" if met is None else ("met" if met else "MISSED")
    print(f"{name:44} {figure:>22}  {target:>12}  {verdict:6}  load {at_load}", flush=True)


def cli_run(directory: Path, episodes: int, jobs: int) -> tuple[float, int]:
    command = [
        sys.executable,
        "-m",
        "evopolicygym.cli",
        "evaluate",
        str(directory),
        "--benchmark",
        "cartpole",
        "--episodes",
        str(episodes),
        "--jobs",
        str(jobs),
        "--seed",
        "1",
        "--json",
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, episodes * 500


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--episodes", type=int, default=20, help="500-step Episodes per P1/P3 evaluation"
    )
    parser.add_argument(
        "--short-episodes", type=int, default=100, help="short Episodes per P2 evaluation"
    )
    parser.add_argument(
        "--reps", type=int, default=3, help="interleaved repetitions per figure (median)"
    )
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI row of P3")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-evaluate-"))
    long_prog = write_program(tmp / "long", POLICY)
    short_prog = write_program(tmp / "short", SHORT)
    bench = cartpole()
    n, short_n, reps = args.episodes, args.short_episodes, args.reps
    print(f"{'measure':44} {'figure':>22}  {'target':>12}  {'verdict':6}  load before block")

    at = load()
    raw = statistics.median(raw_loop(50_000) for _ in range(reps))
    row("raw in-process loop", f"{raw:,.0f} steps/s", "", None, at)

    with Evaluator() as ev:
        containment = f"{ev.fork_server.containment} ({', '.join(ev.fork_server.enforced)})"
        for jobs in (1, 2):
            ev.evaluate(long_prog, bench, config(jobs * 2, jobs))  # start and warm the runners

        at = load()
        warm = interleaved(
            reps,
            j1=lambda: timed(lambda: ev.evaluate(long_prog, bench, config(n, 1))),
            j2=lambda: timed(lambda: ev.evaluate(long_prog, bench, config(n, 2))),
            j1_4=lambda: timed(lambda: ev.evaluate(long_prog, bench, config(4, 1))),
            j2_4=lambda: timed(lambda: ev.evaluate(long_prog, bench, config(4, 2))),
        )
        warm_rate = med_rate(warm["j1"])
        row(
            f"P1 warm Evaluator, steps/s / raw ({n}x500)",
            f"{warm_rate / raw:.3f} ({warm_rate:,.0f}/s)",
            ">= 0.28",
            warm_rate / raw >= 0.28,
            at,
        )

        at = load()
        short_warm = interleaved(
            reps, s=lambda: timed(lambda: ev.evaluate(short_prog, bench, config(short_n, 1)))
        )["s"]
        fixed_warm = statistics.median((w - s / warm_rate) / short_n * 1000 for w, s in short_warm)
        row(
            f"P2 warm fixed cost per Episode ({short_n} short)",
            f"{fixed_warm:.2f} ms",
            "<= 2 ms",
            fixed_warm <= 2,
            at,
        )

    at = load()
    one = interleaved(
        reps,
        j1=lambda: timed(lambda: evaluate(long_prog, bench, config(n, 1))),
        j2=lambda: timed(lambda: evaluate(long_prog, bench, config(n, 2))),
        j1_4=lambda: timed(lambda: evaluate(long_prog, bench, config(4, 1))),
        j2_4=lambda: timed(lambda: evaluate(long_prog, bench, config(4, 2))),
    )
    one_rate = med_rate(one["j1"])
    row(
        f"P1 one-shot evaluate(), steps/s / raw ({n}x500)",
        f"{one_rate / raw:.3f} ({one_rate:,.0f}/s)",
        ">= 0.25",
        one_rate / raw >= 0.25,
        at,
    )

    at = load()
    short_one = interleaved(
        reps,
        s1=lambda: timed(lambda: evaluate(short_prog, bench, config(1, 1))),
        sn=lambda: timed(lambda: evaluate(short_prog, bench, config(short_n, 1))),
    )
    per_episode = [
        ((wn - sn / warm_rate) - (w1 - s1 / warm_rate)) / (short_n - 1) * 1000
        for (w1, s1), (wn, sn) in zip(short_one["s1"], short_one["sn"], strict=True)
    ]
    fixed_one = statistics.median(per_episode)
    row(
        f"P2 one-shot fixed cost per Episode ({short_n} short)",
        f"{fixed_one:.2f} ms",
        "<= 3 ms",
        fixed_one <= 3,
        at,
    )
    startup = med_wall(short_one["s1"]) * 1000
    row("   one-shot evaluate() of 1 short Episode", f"{startup:.0f} ms", "", None, at)

    row(
        f"P3 warm, jobs=2 / jobs=1 ({n}x500)",
        f"{med_ratio(warm['j1'], warm['j2']):.2f}x",
        ">= 1.8x",
        med_ratio(warm["j1"], warm["j2"]) >= 1.8,
        "above",
    )
    row(
        f"P3 one-shot, jobs=2 / jobs=1 ({n}x500)",
        f"{med_ratio(one['j1'], one['j2']):.2f}x",
        ">= 1.6x",
        med_ratio(one["j1"], one["j2"]) >= 1.6,
        "above",
    )
    for label, samples in (("warm", warm), ("one-shot", one)):
        ratio = med_ratio(samples["j1_4"], samples["j2_4"])
        row(
            f"P3 {label}, jobs=2 / jobs=1 (4x500)",
            f"{ratio:.2f}x",
            ">= 1.0x",
            ratio >= 1.0,
            "above",
        )
    if not args.no_cli:
        at = load()
        cli = interleaved(
            reps,
            j1=lambda: cli_run(tmp / "long", n, 1),
            j2=lambda: cli_run(tmp / "long", n, 2),
            j1_4=lambda: cli_run(tmp / "long", 4, 1),
            j2_4=lambda: cli_run(tmp / "long", 4, 2),
        )
        ratio = med_ratio(cli["j1"], cli["j2"])
        row(f"P3 CLI, jobs=2 / jobs=1 ({n}x500)", f"{ratio:.2f}x", ">= 1.6x", ratio >= 1.6, at)
        ratio = med_ratio(cli["j1_4"], cli["j2_4"])
        row("P3 CLI, jobs=2 / jobs=1 (4x500)", f"{ratio:.2f}x", ">= 1.0x", ratio >= 1.0, at)
        row(
            "   CLI jobs=1 / jobs=2 wall",
            f"{med_wall(cli['j1']):.2f} / {med_wall(cli['j2']):.2f} s",
            "",
            None,
            at,
        )
    print(
        f"walls (median s): warm j1 {med_wall(warm['j1']):.3f} j2 {med_wall(warm['j2']):.3f}; "
        f"one-shot j1 {med_wall(one['j1']):.3f} j2 {med_wall(one['j2']):.3f}; "
        f"4 Episodes one-shot j1 {med_wall(one['j1_4']):.3f} j2 {med_wall(one['j2_4']):.3f}"
    )
    print(f"containment: {containment}; cpus {sorted(os.sched_getaffinity(0))}; {reps} reps")


if __name__ == "__main__":
    main()

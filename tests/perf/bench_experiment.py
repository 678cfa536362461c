"""An experiment's throughput with --max-runs 2 against 1, and its own bookkeeping's share.

The experiment: the reference Agent on cartpole and acrobot, budget 16, 4 Run seeds x 5
agent seeds = 40 Runs (``--small``: 2 x 2 = 8 Runs), each Run with one evaluation
process (the experiment default). It is run twice into fresh stores with
``evopolicy experiment run --json``, ``--max-runs 1`` then ``--max-runs 2``, and prints:

- Runs/hour of each and their ratio (target >= 1.7x on 2 free cores);
- the cores the experiment kept busy on average (its whole process tree's CPU time over
  its wall time): a Run that keeps more than one core busy at times caps the ratio;
- the experiment's bookkeeping (folding its stream, deciding, appending its events,
  checking the Runs' streams) as a share of its wall time (target <= 5%), and apart from
  it the share spent creating Runs (planning pools, storing programs) in the runner's
  process, which a Run started by hand pays too.

The load average before each is printed: other work on the machine slows the wider
setting most. Targets missed are printed as such.

Run: uv run python tests/perf/bench_experiment.py [--small] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """
name = "bench"
profile = "quick"
seeds = {seeds}
agent_seeds = {agent_seeds}

[run]
episode_budget = 16

[[agents]]
provider = "reference"

[[benchmarks]]
id = "cartpole"

[[benchmarks]]
id = "acrobot"
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(spec: Path, store: Path, max_runs: int) -> dict[str, float]:
    load = os.getloadavg()[0]
    cpu = _cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicygym.cli",
            "experiment",
            "run",
            str(spec),
            "--store",
            str(store),
            "--max-runs",
            str(max_runs),
            "--allow-uncontained-agent",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu  # the whole tree's: the runner, its Runs, their Agents and evaluators
    if done.returncode != 0:
        raise SystemExit(f"--max-runs {max_runs}: exit {done.returncode}\n{done.stderr}")
    outcome = json.loads(done.stdout)
    return {
        "load": load,
        "wall": wall,
        "runs": outcome["runs_started"],
        "inner_wall": outcome["wall_s"],
        "bookkeeping": outcome["bookkeeping_s"],
        "create": outcome["create_s"],
        "cores": cpu / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", action="store_true", help="8 Runs instead of 40")
    parser.add_argument(
        "--keep", metavar="DIR", help="write the stores here instead of a temporary directory"
    )
    args = parser.parse_args()
    seeds, agent_seeds = (2, 2) if args.small else (4, 5)
    with tempfile.TemporaryDirectory(prefix="bench-experiment-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        spec = root / "bench.toml"
        spec.write_text(SPEC.format(seeds=seeds, agent_seeds=agent_seeds))
        results = {}
        for max_runs in (1, 2):
            store = root / f"store-{max_runs}"
            if store.exists():
                raise SystemExit(f"{store} exists: give --keep an empty directory")
            results[max_runs] = r = _run(spec, store, max_runs)
            per_hour = r["runs"] / r["wall"] * 3600
            print(
                f"--max-runs {max_runs}: {r['runs']:.0f} Runs in {r['wall']:.1f} s "
                f"= {per_hour:.0f} Runs/hour (load before {r['load']:.1f}), "
                f"{r['cores']:.2f} cores busy on average; bookkeeping {r['bookkeeping']:.2f} s = "
                f"{100 * r['bookkeeping'] / r['inner_wall']:.2f}% of its wall time, creating Runs "
                f"{r['create']:.2f} s = {100 * r['create'] / r['inner_wall']:.1f}%"
            )
    one, two = results[1], results[2]
    ratio = (two["runs"] / two["wall"]) / (one["runs"] / one["wall"])
    share = max(r["bookkeeping"] / r["inner_wall"] for r in results.values())
    print(
        f"Runs/hour ratio (--max-runs 2 / 1): {ratio:.2f}x  "
        f"target >= 1.7x: {'met' if ratio >= 1.7 else 'MISSED'}"
    )
    print(
        f"bookkeeping share (worst of the two): {100 * share:.2f}%  "
        f"target <= 5%: {'met' if share <= 0.05 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()

"""Runs/hour of an experiment carried on Ray against the same experiment on this machine.

The experiment: the reference Agent on cartpole and acrobot, budget 16, 5 Run seeds x 2
agent seeds = 20 Runs (``--small``: 2 x 2 = 8), each Run with one evaluation process.
It is run with ``evopolicy experiment run --json`` into fresh stores, once with the local
executor and once with ``--executor ray`` on a local Ray cluster of 2 CPUs (started here
before, as a lab's cluster would be running already: its start is printed, not counted),
both with ``--max-runs 2``; then again in the other order, so a change in the machine's
load falls on both. It prints each one's Runs/hour and the ratio Ray / local (target >= 0.8:
placing each Run's Host as a Ray actor costs little beside the Run), with the load average
before each. Targets missed are printed as such.

Run: uv run python tests/perf/bench_ray_runs.py [--small] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
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


def _run(spec: Path, store: Path, extra: list[str]) -> dict[str, float]:
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "experiment", "run", str(spec),
         "--store", str(store), "--max-runs", "2", "--allow-uncontained-agent", "--json", *extra],
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(extra) or 'local'}: exit {done.returncode}\n{done.stderr[-3000:]}"
        )
    outcome = json.loads(done.stdout)
    if not outcome["complete"]:
        raise SystemExit(f"{' '.join(extra) or 'local'}: not every cell ended\n{done.stdout}")
    return {"load": load, "wall": wall, "runs": outcome["runs_started"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", action="store_true", help="8 Runs instead of 20")
    parser.add_argument(
        "--keep", metavar="DIR", help="write the stores here instead of a temporary directory"
    )
    args = parser.parse_args()
    try:
        from ray.cluster_utils import Cluster
    except ModuleNotFoundError:
        raise SystemExit("Ray is not installed: uv sync --extra ray") from None
    seeds, agent_seeds = (2, 2) if args.small else (5, 2)
    with tempfile.TemporaryDirectory(prefix="bench-ray-runs-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        spec = root / "bench.toml"
        spec.write_text(SPEC.format(seeds=seeds, agent_seeds=agent_seeds))
        started = time.perf_counter()
        # One node of 2 CPUs; this process does not join it (the experiment's does).
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False}
        )
        print(
            f"Ray cluster (1 node, 2 CPUs) started in {time.perf_counter() - started:.1f} s "
            "(not counted)"
        )
        try:
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            runs = 0
            for turn, order in enumerate((("local", "ray"), ("ray", "local"))):
                for name in order:
                    store = root / f"store-{name}-{turn}"
                    if store.exists():
                        raise SystemExit(f"{store} exists: give --keep an empty directory")
                    extra = (
                        ["--executor", "ray", "--ray-address", cluster.address]
                        if name == "ray"
                        else []
                    )
                    r = _run(spec, store, extra)
                    runs = int(r["runs"])
                    walls[name].append(r["wall"])
                    print(
                        f"{name:5} (turn {turn + 1}): {runs} Runs in {r['wall']:.1f} s = "
                        f"{runs / r['wall'] * 3600:.0f} Runs/hour (load before {r['load']:.1f})"
                    )
        finally:
            cluster.shutdown()
    local, ray = sum(walls["local"]), sum(walls["ray"])
    ratio = local / ray  # Runs/hour of Ray over local: the same Runs, so walls inverted
    print(
        f"Runs/hour, both turns: local {2 * runs / local * 3600:.0f}, "
        f"ray {2 * runs / ray * 3600:.0f}"
    )
    print(
        f"Runs/hour ratio (ray / local, --max-runs 2): {ratio:.2f}x  "
        f"target >= 0.8x: {'met' if ratio >= 0.8 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()

"""Probing a policy program: what it does on sampled observations, for fitting templates.

Owns ``PROBE_SCRIPT`` (a standalone program the agent writes into its workspace and
runs), ``ProbeResult`` and ``run_probe``, which runs the script in a child interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PROBE_SCRIPT", "ProbeResult", "run_probe"]

PROBE_SCRIPT = '''"""Probe a policy program: feed it sampled observations and print what it does.

Usage: python probe.py PROGRAM_DIR TASK_JSON [--samples N] [--seed S]
Prints one JSON object: {"observations": [...], "actions": [...], "errors": n}.
Box observations are sampled uniformly within finite bounds, else around 0 with the
component's scale; Discrete observations are enumerated.
"""

import argparse
import importlib.util
import json
import random
import sys
import types


def sample(space, rng, count):
    if space.get("type") == "discrete":
        start, n = int(space.get("start", 0)), int(space["n"])
        return [start + i for i in range(min(n, max(count, 4096)))]
    shape = space.get("shape") or []
    size = 1
    for s in shape:
        size *= int(s)

    def flat(v):
        if isinstance(v, list):
            return [x for item in v for x in flat(item)]
        return [v]

    low, high = flat(space.get("low")), flat(space.get("high"))
    low = low * size if len(low) == 1 else low
    high = high * size if len(high) == 1 else high
    if len(low) != size or len(high) != size:
        low = high = [None] * size
    out = []
    for _ in range(count):
        obs = []
        for lo, hi in zip(low, high):
            finite = lo is not None and hi is not None and abs(lo) < 1e6 and abs(hi) < 1e6
            obs.append(round(rng.uniform(lo, hi), 4) if finite else round(rng.gauss(0.0, 1.0), 4))
        out.append(obs)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("task")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.task) as handle:
        spec = json.load(handle)["benchmark"]
    rng = random.Random(args.seed)
    random.seed(args.seed)
    observations = sample(spec["observation_space"], rng, args.samples)
    sys.path.insert(0, args.program)
    module_spec = importlib.util.spec_from_file_location("policy", args.program + "/policy.py")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["policy"] = module
    module_spec.loader.exec_module(module)
    context = types.SimpleNamespace(
        observation_space=spec["observation_space"],
        action_space=spec["action_space"],
        policy_seed=args.seed,
        metadata=spec.get("metadata") or {},
        environment_parameters=spec.get("environment_parameters") or {},
    )
    policy = module.make_policy(context)
    try:
        import numpy
    except ImportError:
        numpy = None
    actions, errors = [], 0
    for obs in observations:
        value = obs
        if numpy is not None and isinstance(obs, list):
            value = numpy.asarray(obs, dtype=numpy.float32)
            value.setflags(write=False)
        try:
            action = policy.act(value)
            if hasattr(action, "tolist"):
                action = action.tolist()
            json.dumps(action)
        except Exception:
            action, errors = None, errors + 1
        actions.append(action)
    print(json.dumps({"observations": observations, "actions": actions, "errors": errors}))


if __name__ == "__main__":
    main()
'''


@dataclass(frozen=True)
class ProbeResult:
    observations: list[Any]
    actions: list[Any]
    errors: int
    output: str  # what the probe printed (or why it failed)
    ok: bool


def run_probe(
    program_dir: str | os.PathLike[str],
    task_path: str | os.PathLike[str],
    *,
    script_path: str | os.PathLike[str] | None = None,
    samples: int = 256,
    seed: int = 0,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> ProbeResult:
    """Run ``PROBE_SCRIPT`` on a program in a child interpreter (it may crash or hang)."""
    with tempfile.TemporaryDirectory(prefix="probe-") as scratch:
        script = Path(script_path) if script_path is not None else Path(scratch) / "probe.py"
        if script_path is None:
            script.write_text(PROBE_SCRIPT)
        argv = [sys.executable, str(script), str(program_dir), str(task_path)]
        argv += ["--samples", str(samples), "--seed", str(seed)]
        try:
            done = subprocess.run(
                argv,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ProbeResult([], [], 0, f"probe failed: {exc}", False)
    output = done.stdout + (done.stderr[-2000:] if done.returncode else "")
    if done.returncode != 0:
        return ProbeResult([], [], 0, output + f"\nexit code: {done.returncode}", False)
    try:
        data = json.loads(done.stdout)
        return ProbeResult(
            data["observations"], data["actions"], int(data["errors"]), done.stdout, True
        )
    except (ValueError, KeyError, TypeError) as exc:
        return ProbeResult([], [], 0, output + f"\nunreadable probe output: {exc}", False)

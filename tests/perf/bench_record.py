"""Bytes on disk (P8) and wall time (P9) of a scripted short Run.

The Run: CartPole, a `command` Agent that submits 10 times through `evopolicy session`
(5 Episodes each, so the budget of 50 is spent; each Submission an edited program) and
finishes naming 3 candidates; Validation 5 Episodes per candidate, Assessment 10,
traces of every train Episode kept (``record_trajectories="train"``, the default).
"Short" Episodes: the program pushes one way only, so CartPole fails in about ten
steps. The long variant balances the pole for all 500 steps.

Prints, from one run on this machine:
- wall time of creating and driving the Run (``create_run`` + ``RunHost.drive``, as
  ``evopolicy run`` does), median of ``--repeat`` runs, short and 500-step, each
  beside its target (P9: <= 1.5 s and <= 2.0 s); the first short Run of the process
  also pays for importing what opening a store and a Benchmark imports;
- the same Runs through the real command line (``evopolicy run ... --agent command``),
  which adds the CLI's start-up;
- the store's bytes on disk once the Run is closed: the SQLite log (and its WAL, if
  any), the blob directory, allocated (what ``du`` counts) and apparent; broken down by
  event type (payload bytes) and blob kind (traces, feedback, programs, pools, ...);
- P8: the short Run's bytes against the reference implementation's 1.18 MB for the same
  Run (a constant measured in issue 18; the reference cannot be run here), target <= 20%.

Usage: uv run python tests/perf/bench_record.py [--repeat N] [--no-cli] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.program import Program
from evopolicygym.records.location import open_store
from evopolicygym.run import RunHost, create_run
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig

REFERENCE_BYTES = 1_180_000  # the reference implementation's bytes for this Run (issue 18)
P8_TARGET = 0.20
P9_SHORT_TARGET = 1.5
P9_LONG_TARGET = 2.0
SUBMISSIONS = 10
PER_SUBMISSION = 5

SHORT = """
class Policy:
    def act(self, obs):
        return 1

def make_policy(context):
    return Policy()
"""
LONG = """
class Policy:
    def act(self, obs):
        return 1 if obs[2] + 0.5 * obs[3] > 0 else 0

def make_policy(context):
    return Policy()
"""

# The Agent: edits its program (a comment line) and submits it on the next 5 Episodes,
# 10 times, then finishes naming three Submissions.
AGENT = textwrap.dedent(
    """
    import json, os, pathlib, subprocess, sys
    CLI = json.loads(os.environ["EVOPOLICY_CLI"])
    program = pathlib.Path(os.environ["EVOPOLICY_WORKSPACE"]) / "program" / "policy.py"
    source = program.read_text()
    n, per = int(sys.argv[1]), int(sys.argv[2])
    for i in range(n):
        program.write_text(source + f"# edit {i}\\n")
        subprocess.run([*CLI, "session", "submit", "--episodes", f"{i * per}:{(i + 1) * per}"],
                       check=True, capture_output=True)
    subprocess.run([*CLI, "session", "finish", "1", "2", "3"], check=True, capture_output=True)
    """
)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def config() -> RunConfig:
    return RunConfig(
        episode_budget=SUBMISSIONS * PER_SUBMISSION,
        validation=ValidationConfig(episodes_per_candidate=5),
        assessment=AssessmentConfig(episodes=10),
    )


def program_dir(tmp: Path, name: str, source: str) -> Path:
    directory = tmp / name
    directory.mkdir(exist_ok=True)
    (directory / "policy.py").write_text(source)
    return directory


def host_run(tmp: Path, store_dir: Path, agent: Path, source: str) -> tuple[float, str]:
    """create_run + RunHost.drive in this process, as `evopolicy run` does; (wall, run id)."""
    started = time.perf_counter()
    program = Program.from_directory(program_dir(tmp, "program", source))
    with open_store(store_dir, create=True) as store:
        identity = agent_identity(
            "command", command=f"{sys.executable} {agent} {SUBMISSIONS} {PER_SUBMISSION}"
        )
        run_id = create_run(store, "cartpole", config(), identity, program=program)
        RunHost(store, run_id, launcher=ProviderLauncher()).drive()
    return time.perf_counter() - started, run_id


def cli_run(tmp: Path, store_dir: Path, agent: Path, source: str) -> float:
    command = [
        sys.executable,
        "-m",
        "evopolicygym.cli",
        "run",
        "--benchmark",
        "cartpole",
        "--agent",
        "command",
        "--agent-command",
        f"{sys.executable} {agent} {SUBMISSIONS} {PER_SUBMISSION}",
        "--program",
        str(program_dir(tmp, "program", source)),
        "--budget",
        str(SUBMISSIONS * PER_SUBMISSION),
        "--validation-episodes",
        "5",
        "--assessment-episodes",
        "10",
        "--store",
        str(store_dir),
        "--json",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"evopolicy run failed ({done.returncode}): {done.stdout}{done.stderr}")
    return elapsed


def _allocated(path: Path) -> int:
    return os.lstat(path).st_blocks * 512


def disk_usage(store_dir: Path) -> dict[str, tuple[int, int, int]]:
    """(files, apparent bytes, allocated bytes) of the log, its WAL/SHM, the blob files,
    the blob directories, and anything else in the store."""
    parts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for root, dirs, files in os.walk(store_dir):
        for name in dirs:
            path = Path(root, name)
            key = (
                "blob directories"
                if "blobs" in path.relative_to(store_dir).parts
                else "other directories"
            )
            parts[key][0] += 1
            parts[key][1] += os.lstat(path).st_size
            parts[key][2] += _allocated(path)
        for name in files:
            path = Path(root, name)
            rel = path.relative_to(store_dir)
            if rel.parts[0] == "blobs" and name.startswith("pack.db"):
                key = f"blobs/{name} (SQLite blob pack)"
            elif rel.parts[0] == "blobs":
                key = "blob files"
            elif name == "events.db":
                key = "events.db (SQLite log)"
            elif name.startswith("events.db-"):
                key = f"{name} (SQLite WAL/SHM)"
            else:
                key = f"other: {rel}"
            parts[key][0] += 1
            parts[key][1] += os.lstat(path).st_size
            parts[key][2] += _allocated(path)
    return {k: (v[0], v[1], v[2]) for k, v in parts.items()}


def _digests(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, str):
        if value.startswith("sha256:") and len(value) == 71:
            out.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _digests(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list):
        for item in value:
            _digests(item, path, out)


def _kind(event_type: str, field: str) -> str:
    lowered = field.lower()
    if "trace" in lowered:
        return "traces"
    if "pool" in lowered:
        return "pools"
    if "program" in lowered or "skill" in lowered:
        return "programs"
    if event_type.startswith("Feedback") or "feedback" in lowered or "artifact" in lowered:
        return "feedback"
    if "stdout" in lowered or "stderr" in lowered or "stream" in lowered or "output" in lowered:
        return "agent output"
    return f"other ({event_type}.{field})"


def breakdown(store_dir: Path) -> tuple[dict[str, tuple[int, int]], dict[str, list[int]], int]:
    """Event payload bytes by type, and blob bytes by kind: {kind: [blobs, raw bytes,
    stored bytes, allocated bytes]}; and the events table's payload total."""
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    kinds: dict[str, str] = {}
    with open_store(store_dir) as store:
        position = 0
        while rows := store.events.read_event_rows(position, 10_000):
            for row in rows:
                position, _stream, _version, event_type, _schema, payload = row
                by_type[event_type][0] += 1
                by_type[event_type][1] += len(payload)
                found: list[tuple[str, str]] = []
                _digests(json.loads(payload), "", found)
                for field, digest in found:
                    kinds.setdefault(digest, _kind(event_type, field))
        blobs = store.blobs
        program_blobs: set[str] = set()
        for digest in blobs.program_digests():
            tree = blobs.program_tree(digest)
            program_blobs.add(tree)
            for entry in json.loads(blobs.get(tree))["entries"]:
                program_blobs.add(entry["blob"])
        for digest in program_blobs:
            kinds[digest] = "programs"
        # A pool manifest names its chunks.
        for digest, kind in list(kinds.items()):
            if kind == "pools":
                try:
                    manifest = json.loads(blobs.get(digest))
                except ValueError:
                    continue
                inner: list[tuple[str, str]] = []
                _digests(manifest, "", inner)
                for _field, chunk in inner:
                    kinds[chunk] = "pools"
        by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for digest in stored_digests(blobs):
            kind = kinds.get(digest, "unreferenced by an event")
            entry = by_kind[kind]
            entry[0] += 1
            entry[1] += len(blobs.get(digest))
            stored, allocated = stored_size(blobs, digest)
            entry[2] += stored
            entry[3] += allocated
    return (
        {k: (v[0], v[1]) for k, v in by_type.items()},
        dict(by_kind),
        sum(v[1] for v in by_type.values()),
    )


def stored_digests(blobs: Any) -> list[str]:
    return list(blobs.digests())


def stored_size(blobs: Any, digest: str) -> tuple[int, int]:
    """(stored bytes, allocated bytes) of one blob; a packed blob's share of its pack."""
    sizer = getattr(blobs, "stored_size", None)
    if sizer is not None:
        stored: int = sizer(digest)
        return stored, stored
    path = blobs.path(digest)
    return os.lstat(path).st_size, _allocated(path)


def report_bytes(store_dir: Path, label: str) -> int:
    usage = disk_usage(store_dir)
    total_apparent = sum(v[1] for v in usage.values())
    total_allocated = sum(v[2] for v in usage.values())
    print(f"\n{label}: store on disk after the Run closed")
    print(f"  {'part':40s} {'files':>6s} {'apparent':>11s} {'allocated':>11s}")
    for key, (files, apparent, allocated) in sorted(usage.items(), key=lambda kv: -kv[1][2]):
        print(f"  {key:40s} {files:6d} {apparent:11,d} {allocated:11,d}")
    print(
        f"  {'total':40s} {sum(v[0] for v in usage.values()):6d} "
        f"{total_apparent:11,d} {total_allocated:11,d}"
    )
    by_type, by_kind, payload_total = breakdown(store_dir)
    print(
        f"  events: {sum(v[0] for v in by_type.values())} events, {payload_total:,d} payload bytes"
    )
    for event_type, (count, size) in sorted(by_type.items(), key=lambda kv: -kv[1][1]):
        print(f"    {event_type:32s} {count:5d} events {size:9,d} B")
    print(f"  blobs: {'kind':26s} {'blobs':>6s} {'raw':>10s} {'stored':>10s} {'allocated':>10s}")
    for kind, (count, raw, stored, allocated) in sorted(by_kind.items(), key=lambda kv: -kv[1][3]):
        print(f"         {kind:26s} {count:6d} {raw:10,d} {stored:10,d} {allocated:10,d}")
    return total_allocated


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--no-cli", action="store_true", help="skip the evopolicy run command lines"
    )
    parser.add_argument("--keep", type=Path, default=None, help="copy the short Run's store here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        agent = tmp / "agent.py"
        agent.write_text(AGENT)
        walls: dict[str, list[float]] = {"short": [], "long": [], "short, CLI": [], "long, CLI": []}
        loads = []
        for i in range(args.repeat):
            for variant, source in (("short", SHORT), ("long", LONG)):
                loads.append(os.getloadavg()[0])
                store_dir = tmp / f"store-{variant}-{i}"
                wall, _run = host_run(tmp, store_dir, agent, source)
                walls[variant].append(wall)
                if not args.no_cli:
                    walls[f"{variant}, CLI"].append(
                        cli_run(tmp, tmp / f"cli-{variant}-{i}", agent, source)
                    )
        print(
            f"scripted Run: CartPole, {SUBMISSIONS} submissions x {PER_SUBMISSION} Episodes "
            f"(budget {SUBMISSIONS * PER_SUBMISSION}), 3 candidates x 5 validation Episodes "
            f"(+ the initial program), assessment 10; traces of every train Episode"
        )
        print(f"load average (1 min) before each run: {min(loads):.2f}-{max(loads):.2f}")
        print(
            "\nP9 wall time, create + drive (RunHost, as `evopolicy run` does), median of "
            f"{args.repeat}:"
        )
        for variant, target in (("short", P9_SHORT_TARGET), ("long", P9_LONG_TARGET)):
            values = walls[variant]
            median = statistics.median(values)
            spread = ", ".join(f"{v:.2f}" for v in values)
            print(
                f"  {variant:6s} Episodes: {median:6.2f} s  ({spread})  "
                f"target <= {target} s: {verdict(median <= target)}"
            )
        if not args.no_cli:
            print("  the same through `evopolicy run ... --agent command` (a fresh process each):")
            for variant in ("short, CLI", "long, CLI"):
                values = walls[variant]
                print(
                    f"  {variant:11s}: {statistics.median(values):6.2f} s  "
                    f"({', '.join(f'{v:.2f}' for v in values)})"
                )
        short_bytes = report_bytes(tmp / "store-short-0", "short Run")
        long_bytes = report_bytes(tmp / "store-long-0", "500-step Run")
        ratio = short_bytes / REFERENCE_BYTES
        print(
            f"\nP8 bytes on disk (allocated), short Run: {short_bytes:,d} B = {ratio:.3f} "
            f"of the reference implementation's {REFERENCE_BYTES:,d} B "
            f"(a constant from issue 18, not measured here); "
            f"target <= {P8_TARGET:.2f}: {verdict(ratio <= P8_TARGET)}"
        )
        print(f"   500-step Run: {long_bytes:,d} B")
        if args.keep is not None:
            shutil.copytree(tmp / "store-short-0", args.keep, dirs_exist_ok=True)


if __name__ == "__main__":
    main()

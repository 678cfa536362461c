"""HTML report generation time and file size, against the issue's targets.

Synthesizes a store of 1,000 recorded Runs with the export benchmark's builder
(``bench_export.build_store``: three Benchmarks, two agents, 3-6 Submissions each, some
failed), then in a fresh child process per repeat writes:

- the page over all 1,000 Runs (``report.runs_report``: the experiment page's sections,
  agents by name and Benchmarks by id),
- the page over an experiment-sized set, the first 40 Runs (the issue's experiment of 40),
- one Run's page (timeline, diffs, transcript).

For each it prints the median seconds (the work, and the child's whole life with its
imports) and the file's size, beside the targets: under 10 s and under 20 MB at 1,000
Runs. Missed targets are printed as missed. ``--profile`` adds where the 1,000-Run page
spends its time.

Run: uv run python tests/perf/bench_report.py [--runs 1000] [--repeats 3] [--profile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PERF = Path(__file__).resolve().parent
if str(PERF) not in sys.path:
    sys.path.insert(0, str(PERF))

SECONDS_TARGET = 10.0
MB_TARGET = 20.0
EXPERIMENT_SIZE = 40


def child(case: str, store_dir: Path, output: Path, profile: bool) -> dict[str, Any]:
    """One page written in this (fresh) process; the seconds of the work itself."""
    started = time.perf_counter()
    from evopolicygym.records.location import open_store
    from evopolicygym.records.runs import run_stream_id
    from evopolicygym.redaction import Redactor
    from evopolicygym.report import run_report, runs_report

    imported = time.perf_counter()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with open_store(store_dir) as store:
        ids = [info.stream_id.removeprefix("run-") for info in store.events.streams("run-")]
        if case == "all":
            built = runs_report(store, title=f"{len(ids)} Runs")
        elif case == "experiment":
            built = runs_report(store, ids[:EXPERIMENT_SIZE], title=f"{EXPERIMENT_SIZE} Runs")
        else:
            built = run_report(store, run_stream_id(ids[0]), redact=Redactor().text)
    size = len(built.html.encode("utf-8"))
    output.write_text(built.html, encoding="utf-8")
    done = time.perf_counter()
    result: dict[str, Any] = {
        "runs": built.runs,
        "bytes": size,
        "work_s": done - imported,
        "imports_s": imported - started,
    }
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(
            r"evopolicygym[/\\]", 30
        )
        where = str(PERF.parent.parent) + "/"
        result["profile"] = text.getvalue().replace(where, "")
    return result


def spawn(case: str, store_dir: Path, output: Path, profile: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        case,
        str(store_dir),
        str(output),
    ]
    done = subprocess.run(argv + (["--profile"] if profile else []), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{case} child failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - started
    return result


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1000, help="Runs in the synthetic store (default 1000)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="children per case (median kept)")
    parser.add_argument(
        "--profile", action="store_true", help="profile the page over every Run once"
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("CASE", "STORE", "OUTPUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        case, store_dir, output = args.child
        print(json.dumps(child(case, Path(store_dir), Path(output), args.profile)))
        return

    from bench_export import build_store  # the export benchmark's synthetic Runs

    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        root = Path(tmp)
        built_s = build_store(root / "store", args.runs)
        print(f"store: {args.runs:,} synthetic Runs built in {built_s:.1f} s")
        cases = [
            ("all", f"{args.runs:,} Runs"),
            ("experiment", f"{EXPERIMENT_SIZE} Runs"),
            ("run", "one Run"),
        ]
        print(
            f"{'page':<12} {'work s':>8} {'process s':>10} {'MB':>7}   "
            f"target (< {SECONDS_TARGET:g} s, < {MB_TARGET:g} MB)"
        )
        for case, label in cases:
            results = [
                spawn(case, root / "store", root / f"{case}.html") for _ in range(args.repeats)
            ]
            work = statistics.median(r["work_s"] for r in results)
            process = statistics.median(r["process_s"] for r in results)
            mb = results[0]["bytes"] / 1e6
            line = f"{label:<12} {work:>8.2f} {process:>10.2f} {mb:>7.2f}"
            if case == "all":
                line += (
                    f"   time {verdict(process < SECONDS_TARGET)} "
                    f"({process / SECONDS_TARGET:.2f}x the target), "
                    f"size {verdict(mb < MB_TARGET)} ({mb / MB_TARGET:.2f}x)"
                )
            print(line)
        if args.profile:
            print(spawn("all", root / "store", root / "profiled.html", profile=True)["profile"])


if __name__ == "__main__":
    main()

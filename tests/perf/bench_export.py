"""Dataset export (``sft``) throughput and peak memory against a raw read of the same Runs.

Synthesizes stores of 100, 1,000 and 10,000 recorded Runs (``tests/support/runlogs.py``:
realistic transcripts of tens of messages with tool calls, Submissions with
Episode traces, validation, assessment), then for each size exports ``sft`` in a
fresh child process and prints: export seconds, rows/s and Runs/s; the time per
Run relative to the smallest size (linearity); the ratio to a raw pass in the
same kind of child that reads and decodes every event of every Run stream; and
the child's peak RSS beside its RSS after imports. Raw pass and export alternate
per repeat and the median is kept, so both see the same machine load.
Targets (printed, not asserted): time linear in Runs; peak RSS < 1 GiB at 10,000.

Run: uv run python tests/perf/bench_export.py [--quick] [--sizes 100,1000,10000]
     [--repeats 3] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evopolicygym.records.events import AgentMessages
from evopolicygym.records.location import Store, open_store
from evopolicygym_exporters import ExportOptions, export

CHECKOUT = Path(__file__).resolve().parents[2]  # where tests.support.runlogs is found
FORMAT = "sft"
SIZES = (100, 1_000, 10_000)
QUICK = (100, 1_000)
RSS_TARGET_MIB = 1024
RSS_TARGET_AT = 10_000
GROWTH_LIMIT = 1.25  # s/Run may grow at most this much from one size to the next
BENCHMARKS = ("toy-counter", "cartpole", "frozen-lake")
if str(CHECKOUT) not in sys.path:
    sys.path.insert(0, str(CHECKOUT))

HELPER = "def clip(x, low=-1.0, high=1.0):\n    return max(low, min(high, x))\n"


def max_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


# --------------------------------------------------------------------------- synthesis


def synth_run(i: int) -> Any:
    """Run ``i`` of every store (so a smaller store is a prefix of a larger one): 3-6
    Submissions, a few failed or untraced, 1-3 remarks per Submission; programs drawn
    from a small set, so their blobs (and the one trace shape) are shared across Runs."""
    from evopolicygym.transcript import AgentIdentity
    from tests.support.runlogs import Planned, SynthRun, policy_source

    rng = random.Random(i)
    pool_size = 12
    submissions = []
    scores: list[tuple[float, int]] = []
    used = 0
    for sid in range(1, rng.randint(3, 6) + 1):
        files = {"policy.py": policy_source(rng.randrange(21) / 10, rng.random() < 0.3)}
        if rng.random() < 0.2:
            files["helpers.py"] = HELPER
        count = min(rng.randint(1, 2), pool_size - used)
        indices = list(range(used, used + count))
        used += count
        failed = sid > 1 and rng.random() < 0.1
        rewards = None if failed else [round(rng.uniform(0, 500), 1) for _ in indices]
        submissions.append(Planned(files, indices, rewards, traced=rng.random() < 0.8))
        if rewards is not None:
            scores.append((sum(rewards) / len(rewards), sid))
    candidates = [sid for _, sid in sorted(scores, reverse=True)[:2]]
    agent = (
        AgentIdentity(name="reference", provider="reference")
        if i % 3
        else AgentIdentity(
            name="claude", provider="chat", model="model-x", options={"temperature": 0.7}
        )
    )
    faulted = rng.random() < 0.05
    return SynthRun(
        run_id=f"bench-{i:06d}",
        submissions=submissions,
        benchmark_id=BENCHMARKS[i % len(BENCHMARKS)],
        agent=agent,
        candidates=candidates,
        reason="agent_failed" if faulted else "finished",
        assessment_score=None if faulted else round(rng.uniform(0, 500), 1),
        chatter=rng.randint(1, 3),
        pool_size=pool_size,
    )


def build_store(path: Path, runs: int) -> float:
    """Write ``runs`` Runs into a new store at ``path``; the seconds it took."""
    from tests.support.runlogs import write_run

    started = time.perf_counter()
    with open_store(path, create=True) as store:
        for i in range(runs):
            write_run(store, synth_run(i), canary=False)
    return time.perf_counter() - started


def shape(store: Store) -> dict[str, float]:
    """Per-Run averages of a store: events, transcript messages and bytes, all payload bytes."""
    streams = store.events.streams("run-")
    events = messages = transcript = payload = 0
    for info in streams:
        for envelope in store.events.read_stream(info.stream_id):
            events += 1
            payload += len(envelope.payload)
            if envelope.type == "AgentMessages":
                event = envelope.event()
                assert isinstance(event, AgentMessages)
                messages += len(event.messages)
                transcript += len(envelope.payload)
    n = max(len(streams), 1)
    return {
        "events": events / n,
        "messages": messages / n,
        "transcript_kb": transcript / n / 1024,
        "payload_kb": payload / n / 1024,
    }


# --------------------------------------------------------------------------- children


def child(mode: str, store_dir: Path, output: Path) -> dict[str, Any]:
    """One measurement in this (fresh) process: RSS after imports, then the work and its peak."""
    start_rss = max_rss_mib()
    with open_store(store_dir) as store:
        started, cpu = time.perf_counter(), time.process_time()
        if mode == "raw":
            runs = events = 0
            for info in store.events.streams("run-"):
                runs += 1
                for envelope in store.events.read_stream(info.stream_id):
                    envelope.event()
                    events += 1
            result: dict[str, Any] = {"runs": runs, "events": events, "rows": 0}
        elif mode == "export":
            report = export(store, [FORMAT], output, ExportOptions())
            splits = report.configs[FORMAT]["splits"]
            result = {"runs": report.runs, "rows": sum(s["rows"] for s in splits.values())}
        else:  # profile
            import cProfile
            import io
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            report = export(store, [FORMAT], output, ExportOptions())
            profiler.disable()
            text = io.StringIO()
            stats = pstats.Stats(profiler, stream=text).sort_stats("cumulative")
            stats.print_stats(r"evopolicygym(_exporters)?[/\\]", 25)
            where = str(Path(__file__).resolve().parent.parent.parent) + os.sep  # the checkout
            result = {"runs": report.runs, "rows": 0, "profile": text.getvalue().replace(where, "")}
        result["seconds"] = time.perf_counter() - started
        result["cpu_seconds"] = time.process_time() - cpu
    result["start_rss_mib"] = start_rss
    result["peak_rss_mib"] = max_rss_mib()
    return result


def spawn(mode: str, store_dir: Path, output: Path) -> dict[str, Any]:
    shutil.rmtree(output, ignore_errors=True)  # an unchanged export would be skipped, not timed
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            mode,
            str(store_dir),
            str(output),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} child failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    shutil.rmtree(output, ignore_errors=True)
    return result


# --------------------------------------------------------------------------- main


def sizes_option(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(
            sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
        )
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of Run counts: {text!r}"
        ) from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("Run counts must be positive")
    return sizes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=sizes_option, default=None, help="Run counts (default 100,1000,10000)"
    )
    parser.add_argument("--quick", action="store_true", help="only 100 and 1,000 Runs")
    parser.add_argument(
        "--repeats", type=int, default=3, help="raw/export child pairs per size (median kept)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the export of 1,000 Runs (or the largest)"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build (default: a temp dir)"
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "STORE", "OUTPUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)

    if args.child:
        mode, store_dir, output = args.child
        print(json.dumps(child(mode, Path(store_dir), Path(output))))
        return

    sizes = args.sizes or (QUICK if args.quick else SIZES)
    repeats = max(args.repeats, 1)
    with tempfile.TemporaryDirectory(prefix="bench-export-", dir=args.dir) as tmp:
        root = Path(tmp)
        print(
            f"export format {FORMAT!r}, default options; {os.cpu_count()} CPUs; "
            f"Python {sys.version.split()[0]}"
        )

        # ----------------------------------------------------------- synthesis
        stores: dict[int, Path] = {}
        for n in sizes:
            stores[n] = root / f"store-{n}"
            seconds = build_store(stores[n], n)
            size_mib = (stores[n] / "events.db").stat().st_size / 2**20
            print(
                f"synthesized {n:>7,} Runs: {seconds:7.1f} s  ({n / seconds:7,.0f} Runs/s; "
                f"events.db {size_mib:,.1f} MiB)"
            )
        with open_store(stores[sizes[0]]) as store:
            per_run = shape(store)
        print(
            f"per Run: {per_run['events']:.0f} events, "
            f"{per_run['messages']:.0f} transcript messages "
            f"({per_run['transcript_kb']:.1f} KiB of AgentMessages payload), "
            f"{per_run['payload_kb']:.1f} KiB of event payload in all"
        )

        # ----------------------------------------------------------- measurements
        results: dict[int, dict[str, Any]] = {}
        for n in sizes:
            raws, exports = [], []
            for _ in range(repeats):
                raws.append(spawn("raw", stores[n], root / "out"))
                exports.append(spawn("export", stores[n], root / "out"))
            assert all(e["runs"] == n for e in exports), [e["runs"] for e in exports]
            results[n] = {
                "export_s": statistics.median(e["seconds"] for e in exports),
                "export_cpu_s": statistics.median(e["cpu_seconds"] for e in exports),
                "raw_s": statistics.median(r["seconds"] for r in raws),
                "rows": exports[0]["rows"],
                "events": raws[0]["events"],
                "start_mib": statistics.median(e["start_rss_mib"] for e in exports),
                "peak_mib": max(e["peak_rss_mib"] for e in exports),
                "raw_peak_mib": max(r["peak_rss_mib"] for r in raws),
            }
            print(
                f"measured {n:>7,} Runs: export {results[n]['export_s']:.2f} s, "
                f"raw read {results[n]['raw_s']:.2f} s (median of {repeats})"
            )

        # ----------------------------------------------------------- table
        first = sizes[0]
        base_per_run = results[first]["export_s"] / first
        print()
        print(
            f"baselines measured in this run: raw read (every Run stream's events decoded) in a "
            f"fresh child; RSS after imports in the same child; time per Run at N={first:,}"
        )
        header = (
            f"{'Runs':>7} {'export s':>9} {'cpu s':>7} {'rows':>7} {'rows/s':>9} {'Runs/s':>9} "
            f"{'s/Run vs':>9} {'growth':>7} {'raw s':>7} {'export':>7} "
            f"{'peak RSS':>9} {'imports':>8} {'over':>8} {'raw peak':>9}"
        )
        units = (
            f"{'':>7} {'(median)':>9} {'':>7} {'':>7} {'':>9} {'':>9} "
            f"{f'N={first:,}':>9} {'vs prev':>7} {'':>7} {'/ raw':>7} "
            f"{'MiB':>9} {'MiB':>8} {'imports':>8} {'MiB':>9}"
        )
        print(header)
        print(units)
        growths: list[float] = []
        previous: float | None = None
        for n in sizes:
            r = results[n]
            per_run_s = r["export_s"] / n
            growth = per_run_s / previous if previous else None
            if growth is not None:
                growths.append(growth)
            previous = per_run_s
            print(
                f"{n:>7,} {r['export_s']:>9.2f} {r['export_cpu_s']:>7.2f} {r['rows']:>7,} "
                f"{r['rows'] / r['export_s']:>9,.0f} {n / r['export_s']:>9,.0f} "
                f"{per_run_s / base_per_run:>8.2f}x "
                f"{'' if growth is None else f'{growth:.2f}x':>7} "
                f"{r['raw_s']:>7.2f} {r['export_s'] / r['raw_s']:>6.2f}x "
                f"{r['peak_mib']:>9.1f} {r['start_mib']:>8.1f} "
                f"{r['peak_mib'] - r['start_mib']:>+8.1f} {r['raw_peak_mib']:>9.1f}"
            )

        # ----------------------------------------------------------- targets
        print()
        if growths:
            linear = all(g <= GROWTH_LIMIT for g in growths)
            verdict = "met" if linear else "MISSED"
            print(
                f"target: time linear in Runs (s/Run grows <= {GROWTH_LIMIT}x "
                f"from one size to the next; worst {max(growths):.2f}x): {verdict}"
            )
        else:
            print("target: time linear in Runs: not judged (one size only)")
        largest = sizes[-1]
        peak = results[largest]["peak_mib"]
        if RSS_TARGET_AT in results:
            verdict = "met" if results[RSS_TARGET_AT]["peak_mib"] < RSS_TARGET_MIB else "MISSED"
            print(
                f"target: peak RSS < 1 GiB at {RSS_TARGET_AT:,} Runs "
                f"({results[RSS_TARGET_AT]['peak_mib']:.0f} MiB): {verdict}"
            )
        else:
            print(
                f"target: peak RSS < 1 GiB at {RSS_TARGET_AT:,} Runs: not measured "
                f"(largest here {largest:,} Runs: {peak:.0f} MiB)"
            )

        # ----------------------------------------------------------- profile
        if args.profile:
            n = 1_000 if 1_000 in stores else largest
            profiled = spawn("profile", stores[n], root / "out")
            print()
            print(
                f"cProfile of the {FORMAT} export of {n:,} Runs "
                "(cumulative, evopolicygym and its exporters only):"
            )
            print(profiled["profile"])


if __name__ == "__main__":
    main()

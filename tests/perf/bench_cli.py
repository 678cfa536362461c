"""Start-up of the ``evopolicy`` command line, against a bare interpreter measured in the same run.

Prints, for each command line, the median wall time and peak RSS (of the child process,
from wait4) over the repetitions, beside its target, and the same for ``python -c pass``
(the baseline: what any Python command costs on this machine). Targets: ``evopolicy --help``
<= 0.15 s and <= 60 MiB. Run: uv run python tests/perf/bench_cli.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MiB = 1024 * 1024


def _evopolicy() -> list[str]:
    """The console script as a user runs it, or ``python -m evopolicygym.cli`` without one."""
    script = Path(sys.executable).parent / "evopolicy"
    if script.is_file():
        return [str(script)]
    found = shutil.which("evopolicy")
    return [found] if found else [sys.executable, "-m", "evopolicygym.cli"]


def _once(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of one run of ``argv``."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read() if child.stderr is not None else b""
    if child.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} exited {child.returncode}: {stderr.decode(errors='replace')}"
        )
    return wall, usage.ru_maxrss * 1024  # ru_maxrss is KiB on Linux


def _measure(argv: list[str], repeat: int) -> tuple[float, float]:
    _once(argv)  # warm the page cache and the bytecode caches
    runs = [_once(argv) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), statistics.median(r for _, r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs per command line (median)")
    args = parser.parse_args()

    cli = _evopolicy()
    rows = [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"], None),
        ("evopolicy --help", [*cli, "--help"], (0.15, 60 * MiB)),
        ("evopolicy session submit --help", [*cli, "session", "submit", "--help"], None),
    ]
    print(f"start-up, median of {args.repeat} runs; load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'command':<34} {'wall s':>8} {'RSS MiB':>8} {'- base s':>9} {'- base MiB':>10}  target"
    )
    base_wall = base_rss = 0.0
    for label, argv, target in rows:
        wall, rss = _measure(argv, args.repeat)
        if target is None and label.endswith("(baseline)"):
            base_wall, base_rss = wall, rss
        if target is None:
            verdict = "-"
        else:
            met = wall <= target[0] and rss <= target[1]
            verdict = (
                f"<= {target[0]:.2f} s / <= {target[1] / MiB:.0f} MiB: {'met' if met else 'MISSED'}"
            )
        print(
            f"{label:<34} {wall:>8.3f} {rss / MiB:>8.1f} {wall - base_wall:>9.3f} "
            f"{(rss - base_rss) / MiB:>10.1f}  {verdict}"
        )


if __name__ == "__main__":
    main()

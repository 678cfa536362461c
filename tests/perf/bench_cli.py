"""Start-up of the ``evopolicy`` command line, and the Agent's ``session submit`` round trip.

Prints, for each command line, the median wall time and peak RSS (of the child process,
from wait4) over the repetitions, beside its target, and the same for ``python -c pass``
(the baseline: what any Python command costs on this machine). Targets: ``evopolicy --help``
<= 0.15 s and <= 60 MiB.

Then a real Run (``--agent command``) whose Agent makes N one-Episode submissions with
``session submit``, timing each from its side (the command as ``$EVOPOLICY_CLI`` gives it,
until its reply is read), beside the same program's evaluation of the same Episodes on a
warm Evaluator (the baseline), the Host's share (the Submission's events: EvaluationStarted
to SubmissionPublished) and the client alone (``session submit`` against a Session that
answers at once: start-up, the exchange, the reply printed, exit). Target: round trip <=
1.5x the evaluation alone.

Run: uv run python tests/perf/bench_cli.py [--repeat N] [--submissions N]
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
    parser.add_argument("--submissions", type=int, default=20, help="submits of the round trip")
    args = parser.parse_args()
    _startup(args.repeat)
    _submit_round_trip(args.submissions, args.repeat)


def _startup(repeat: int) -> None:

    cli = _evopolicy()
    rows = [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"], None),
        ("evopolicy --help", [*cli, "--help"], (0.15, 60 * MiB)),
        ("evopolicy session submit --help", [*cli, "session", "submit", "--help"], None),
    ]
    print(f"start-up, median of {repeat} runs; load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'command':<34} {'wall s':>8} {'RSS MiB':>8} {'- base s':>9} {'- base MiB':>10}  target"
    )
    base_wall = base_rss = 0.0
    for label, argv, target in rows:
        wall, rss = _measure(argv, repeat)
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


# The Agent: N one-Episode submits through $EVOPOLICY_CLI, each timed from its side.
AGENT = """
import json, os, subprocess, sys, time
cli = json.loads(os.environ["EVOPOLICY_CLI"])
times = []
for i in range(int(sys.argv[1])):
    started = time.perf_counter()
    subprocess.run(
        [*cli, "session", "submit", "--episodes", str(i)], check=True, capture_output=True
    )
    times.append(time.perf_counter() - started)
print(json.dumps({"role": "assistant", "content": json.dumps(times)}), flush=True)
"""


def _submit_round_trip(n: int, repeat: int) -> None:
    import json
    import tempfile

    from evopolicygym.agents.launcher import ProviderLauncher
    from evopolicygym.agents.providers import agent_identity
    from evopolicygym.evaluation import EvaluationConfig, Evaluator
    from evopolicygym.program import Program
    from evopolicygym.records.events import AgentMessages, EvaluationStarted, SubmissionPublished
    from evopolicygym.records.location import open_store
    from evopolicygym.records.runs import run_stream_id
    from evopolicygym.registry import baseline_dir, load_benchmark
    from evopolicygym.run import RunHost, create_run
    from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
    from evopolicygym.run.pool import derive_run_seeds, plan_pool, planned

    benchmark = load_benchmark("cartpole")
    directory = baseline_dir(benchmark)
    assert directory is not None
    program = Program.from_directory(directory)
    config = RunConfig(
        episode_budget=n,
        validation=ValidationConfig(enabled=False),
        assessment=AssessmentConfig(enabled=False),
        jobs=1,
    ).resolved()
    pool = plan_pool(benchmark, config, derive_run_seeds(config.seed))
    one = EvaluationConfig(episodes=1, jobs=1)

    def bare() -> list[float]:
        with Evaluator() as evaluator:
            evaluator.evaluate(program, benchmark, one, episodes=planned(pool, [0]))
            times = []
            for i in range(n):
                started = time.perf_counter()
                evaluator.evaluate(program, benchmark, one, episodes=planned(pool, [i]))
                times.append(time.perf_counter() - started)
        return times

    load = os.getloadavg()[0]
    evaluations = bare()
    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp) / "agent.py"
        agent.write_text(AGENT)
        with open_store(Path(tmp) / "store", create=True) as store:
            identity = agent_identity("command", command=f"{sys.executable} {agent} {n}")
            run_id = create_run(store, "cartpole", config, identity)
            RunHost(store, run_id, launcher=ProviderLauncher()).drive()
            started_at: dict[int, int] = {}
            host: list[float] = []
            agent_times: list[float] = []
            for envelope in store.events.read_stream(run_stream_id(run_id)):
                event = envelope.event()
                if isinstance(event, EvaluationStarted):
                    started_at[event.submission_id] = envelope.recorded_at
                elif isinstance(event, SubmissionPublished):
                    host.append((envelope.recorded_at - started_at[event.submission_id]) / 1e9)
                elif isinstance(event, AgentMessages):
                    agent_times += [
                        t
                        for m in event.messages
                        if m.role == "assistant"
                        for t in json.loads(m.content)
                    ]
    evaluations += bare()  # before and after the Run: the machine's load drifts
    if len(agent_times) != n or len(host) != n:
        raise SystemExit(f"the Run made {len(host)} of {n} submissions")
    # The client alone: the same command against a Session that answers at once (start-up,
    # reading the program, the exchange, printing the reply, exit).
    from evopolicygym.run.session_server import SessionServer

    canned = {"ok": True, "result": {"submission_id": 1, "score": 9.5, "episodes": [{"index": 0}]}}
    with SessionServer(lambda _request: canned) as server:
        client = [sys.executable, "-m", "evopolicygym.cli", "session", "submit"]
        argv = [*client, str(directory), "--episodes", "0", "--socket", server.path]
        times = []
        for _ in range(repeat + 1):
            started = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            times.append(time.perf_counter() - started)
        client_s = statistics.median(times[1:])
    evaluation = statistics.median(evaluations)
    trip = statistics.median(agent_times)
    ratio = trip / evaluation
    print()
    print(
        f"session submit round trip, {n} one-Episode CartPole submissions (baseline policy), "
        f"jobs=1, medians; load average {load:.2f}"
    )
    print(f"{'measure':<46} {'ms':>8} {'/ eval':>7}  target")
    rows = [
        ("evaluation alone, warm Evaluator (baseline)", evaluation, "-"),
        ("Host: EvaluationStarted -> Published", statistics.median(host), "-"),
        ("client alone (a Session that answers at once)", client_s, "-"),
        (
            "round trip as the Agent sees it",
            trip,
            f"<= 1.50x: {'met' if ratio <= 1.5 else 'MISSED'}",
        ),
    ]
    for label, seconds, verdict in rows:
        print(f"{label:<46} {seconds * 1e3:>8.1f} {seconds / evaluation:>6.2f}x  {verdict}")


if __name__ == "__main__":
    main()

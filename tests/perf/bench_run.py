"""What a Run costs on top of the evaluations it makes.

Prints, from one run on this machine:
- ``evaluate`` alone: the same single-Episode CartPole evaluations on a warm Evaluator;
- a Run whose command Agent makes the same submissions through `evopolicy session`:
  time per submission as the Agent sees it (client start-up, socket, decide, appends,
  evaluation, workspace publication), and the ratio to the bare evaluation;
- the Host-side share (the submission's events' timestamps: request recorded to
  feedback published), which excludes the Agent's client start-up.

The round trip's target (issue 18): at most 1.5x the bare evaluation. bench_cli.py
prints the same round trip beside the client alone; bench_record.py a whole scripted
Run's wall time and bytes.

Usage: uv run python tests/perf/bench_run.py [--submissions N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.evaluation import EvaluationConfig, Evaluator
from evopolicygym.program import Program
from evopolicygym.records.events import EvaluationStarted, SubmissionPublished
from evopolicygym.records.location import open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run import RunHost, create_run
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.pool import derive_run_seeds, plan_pool, planned

AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    CLI = json.loads(os.environ["EVOPOLICY_CLI"])
    times = []
    for i in range(int(sys.argv[1])):
        started = time.perf_counter()
        subprocess.run(
            [*CLI, "session", "submit", "--episodes", str(i)], check=True, capture_output=True
        )
        times.append(time.perf_counter() - started)
    print(json.dumps({"role": "assistant", "content": json.dumps(times)}), flush=True)
    """
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submissions", type=int, default=30)
    n = parser.parse_args().submissions
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

    with Evaluator() as evaluator:
        evaluator.evaluate(
            program, benchmark, EvaluationConfig(episodes=1, jobs=1), episodes=planned(pool, [0])
        )
        bare = []
        for i in range(n):
            started = time.perf_counter()
            evaluator.evaluate(
                program,
                benchmark,
                EvaluationConfig(episodes=1, jobs=1),
                episodes=planned(pool, [i]),
            )
            bare.append(time.perf_counter() - started)

    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp) / "agent.py"
        agent.write_text(AGENT)
        with open_store(Path(tmp) / "store", create=True) as store:
            identity = agent_identity("command", command=f"{sys.executable} {agent} {n}")
            run_id = create_run(store, "cartpole", config, identity)
            started = time.perf_counter()
            RunHost(store, run_id, launcher=ProviderLauncher()).drive()
            total = time.perf_counter() - started
            envelopes = list(store.events.read_stream(run_stream_id(run_id)))
            seen: dict[int, int] = {}
            host_side = []
            for envelope in envelopes:
                event = envelope.event()
                if isinstance(event, EvaluationStarted):
                    seen[event.submission_id] = envelope.recorded_at
                elif isinstance(event, SubmissionPublished):
                    host_side.append((envelope.recorded_at - seen[event.submission_id]) / 1e9)
            import json

            from evopolicygym.records.events import AgentMessages

            agent_times = next(
                json.loads(m.content)
                for e in (x.event() for x in envelopes)
                if isinstance(e, AgentMessages)
                for m in e.messages
                if m.role == "assistant"
            )
    bare_ms = statistics.median(bare) * 1e3
    agent_ms = statistics.median(agent_times) * 1e3
    host_ms = statistics.median(host_side) * 1e3
    print(f"submissions: {n} of one CartPole Episode (baseline policy), jobs=1")
    print(f"evaluate() alone, warm Evaluator:        {bare_ms:7.1f} ms per evaluation (median)")
    print(
        f"Host side, reserved -> published:        {host_ms:7.1f} ms  "
        f"= {host_ms / bare_ms:4.2f}x evaluate()"
    )
    ratio = agent_ms / bare_ms
    verdict = "met" if ratio <= 1.5 else "MISSED"
    print(
        f"as the Agent sees it (client + socket):  {agent_ms:7.1f} ms  "
        f"= {ratio:4.2f}x evaluate()  (target <= 1.5x: {verdict})"
    )
    print(f"whole Run incl. Agent start and finish:  {total:7.2f} s")


if __name__ == "__main__":
    main()

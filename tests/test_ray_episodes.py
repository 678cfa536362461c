"""The Ray executor for Episodes: the same Episodes give the same records, scores and Feedback
on Ray workers as on the local executor, for whole Runs too; a worker lost mid-Episode is the
Host's fault, retried on another worker; nothing of Ray is imported unless asked for.

One local Ray instance (2 CPUs, no dashboard) serves the whole module: starting one takes
seconds. Skipped where Ray is not installed, failed instead under EVOPOLICY_REQUIRE_RAY=1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from click.testing import CliRunner

from evopolicygym.cli import main
from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator, RayEvaluator
from evopolicygym.program import Program
from evopolicygym.records.location import open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.registry import baseline_dir, load_benchmark
from tests.support.rayutil import local_ray, require_ray

# A Run's events that differ between two Runs of one config wherever they run: the clock
# (durations, message times), process ids, the Run's own id and the blobs of raw process
# output that carry times. Everything else must be equal.
UNTIMED = {
    "duration_s",
    "at",
    "pid",
    "run_id",
    "request_id",
    "raw_blob",
    "stdout_blob",
    "stderr_blob",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """The module's Ray instance: its address, for a second driver to connect to."""
    # Four logical CPUs: the module's RayEvaluator and the one a command makes hold two each.
    with local_ray(num_cpus=4) as ray:
        yield ray.get_runtime_context().gcs_address


@pytest.fixture(scope="module")
def engines(cluster: str) -> Iterator[tuple[Evaluator, RayEvaluator]]:
    with Evaluator() as local, RayEvaluator() as remote:  # the one the module is connected to
        yield local, remote


def program(source: str) -> Program:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "policy.py").write_text(source)
        return Program.from_directory(tmp)


def _hook(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [value.dtype.str, list(value.shape), value.tobytes()]
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value))


def encoded(value: Any) -> bytes:
    """Canonical bytes: equal exactly when every field, array and number is."""
    return msgspec.msgpack.encode(value, enc_hook=_hook)


def untimed(result: EvaluationResult) -> tuple[bytes, bytes, bytes]:
    """The records, the Episodes' summaries and the Feedback, durations left out."""
    records = [msgspec.structs.replace(r, duration_s=0.0) for r in result.records]
    summaries = [msgspec.structs.replace(e, duration_s=0.0) for e in result.episodes]
    return encoded(records), encoded(summaries), encoded(result.feedback)


def both(
    engines: tuple[Evaluator, RayEvaluator], prog: Program, benchmark: Any, config: EvaluationConfig
) -> tuple[EvaluationResult, EvaluationResult]:
    local, remote = engines
    return local.evaluate(prog, benchmark, config), remote.evaluate(prog, benchmark, config)


def test_cartpole_episodes_are_the_same_on_ray_workers(
    engines: tuple[Evaluator, RayEvaluator],
) -> None:
    benchmark = load_benchmark("cartpole")
    found = baseline_dir(benchmark)
    assert found is not None
    baseline = Program.from_directory(found)
    config = EvaluationConfig(episodes=12, seed=5, jobs=2)
    here, there = both(engines, baseline, benchmark, config)
    assert untimed(there) == untimed(here)
    assert [r.spec.index for r in there.records] == list(range(12))
    assert there.feedback.score == here.feedback.score and there.feedback.score > 0
    assert any(r.trace for r in there.records)  # traces came back whole
    # As contained as here, and said so.
    assert (there.containment, there.enforced) == (here.containment, here.enforced)
    assert there.jobs == 2 and there.failures == 0


def test_a_negative_reward_task_scores_the_same(engines: tuple[Evaluator, RayEvaluator]) -> None:
    benchmark = load_benchmark("acrobot")
    prog = program(
        "class Swing:\n"
        "    def act(self, obs):\n"
        "        return 2 if obs[4] + obs[5] > 0 else 0\n\n"
        "def make_policy(context):\n"
        "    return Swing()\n"
    )
    here, there = both(engines, prog, benchmark, EvaluationConfig(episodes=4, seed=2, jobs=2))
    assert untimed(there) == untimed(here)
    assert there.failures == 0 and (benchmark.spec.failure_score or 0) < there.feedback.score < 0


HOSTILE = """
import os, time

class Hostile:
    def __init__(self, kind):
        self.kind = kind

    def act(self, obs):
        if self.kind == 0:
            raise RuntimeError("boom")
        if self.kind == 1:
            while True:
                pass
        if self.kind == 2:
            print("leaving", flush=True)
            os._exit(7)
        return "not an action"

def make_policy(context):
    return Hostile(context.policy_seed % 4)
"""


def test_hostile_policies_are_scored_the_same(engines: tuple[Evaluator, RayEvaluator]) -> None:
    benchmark = load_benchmark("cartpole")
    config = EvaluationConfig(episodes=6, seed=0, jobs=2, episode_timeout=1.0)
    here, there = both(engines, program(HOSTILE), benchmark, config)
    assert untimed(there) == untimed(here)
    statuses = {e.status for e in there.episodes}
    assert statuses == {"exception", "timeout", "protocol_error", "invalid_action"}, statuses
    assert there.feedback.score == benchmark.spec.failure_score


SLOW = """
import time

class Slow:
    def act(self, obs):
        time.sleep(0.02)
        return 1 if obs[2] > 0 else 0

def make_policy(context):
    return Slow()
"""


def test_a_worker_lost_mid_episode_is_retried_on_another(
    engines: tuple[Evaluator, RayEvaluator],
) -> None:
    import ray

    local, remote = engines
    benchmark = load_benchmark("cartpole")
    config = EvaluationConfig(episodes=4, seed=1, jobs=2)
    prog = program(SLOW)
    killed: list[int] = []

    def kill_every_worker(done: int, total: int) -> None:
        # One Episode is in: the other worker is mid-Episode. Both go, as a node would.
        if not killed:
            for slot in list(remote._slots):
                ray.kill(slot.actor)
                killed.append(done)

    there = remote.evaluate(prog, benchmark, config, progress=kill_every_worker)
    here = local.evaluate(prog, benchmark, config)
    assert killed, "the progress callback never ran"
    assert untimed(there) == untimed(here)
    assert there.failures == 0  # the Host's fault, never a scored policy failure
    # The pool made up for them: the next evaluation runs as before.
    again = remote.evaluate(prog, benchmark, EvaluationConfig(episodes=2, seed=1, jobs=2))
    assert (
        untimed(again)[0]
        == untimed(local.evaluate(prog, benchmark, EvaluationConfig(episodes=2, seed=1, jobs=2)))[0]
    )


def test_stop_ends_an_evaluation_on_ray_workers(cluster: str) -> None:
    """The Host's stop (a signal's stop_all) reaches Ray workers mid-Episode: the evaluation
    ends with EvaluationError, and later ones are refused at once."""
    from evopolicygym.evaluation import EvaluationError
    from evopolicygym.evaluation.engine import _live

    benchmark = load_benchmark("cartpole")
    with RayEvaluator() as remote:
        # stop_all reaches it (not called here: it would stop the module's evaluators too).
        assert any(ref() is remote for ref in _live)
        with pytest.raises(EvaluationError, match="stopped"):
            remote.evaluate(
                program(SLOW),
                benchmark,
                EvaluationConfig(episodes=4, jobs=2),
                progress=lambda done, total: remote.stop(),
            )
        with pytest.raises(EvaluationError, match="stopped"):
            remote.evaluate(program(SLOW), benchmark, EvaluationConfig(episodes=1, jobs=1))
        assert remote._slots == []  # its workers went with the stop


def _events(store: Path, run_id: str) -> list[tuple[str, Any]]:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in UNTIMED}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    with open_store(str(store)) as opened:
        return [
            (type(e).__name__, strip(msgspec.to_builtins(e)))
            for e in (env.event() for env in opened.events.read_stream(run_stream_id(run_id)))
        ]


def _messages(events: list[tuple[str, Any]]) -> list[Any]:
    return [m for kind, e in events if kind == "AgentMessages" for m in e["messages"]]


def _facts(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(kind, e) for kind, e in events if kind != "AgentMessages"]


RUN = [
    "run",
    "--benchmark",
    "cartpole",
    "--agent",
    "reference",
    "--budget",
    "6",
    "--validation-episodes",
    "4",
    "--assessment-episodes",
    "4",
    "--jobs",
    "2",
    "--allow-uncontained-agent",
    "--json",
]


def _workers_made() -> int:
    """Episode workers this cluster has started so far, alive or not (Ray's actor table)."""
    import ray

    return sum(a["ActorClassName"] == "EpisodeWorker" for a in ray._private.state.actors().values())


def test_a_reference_run_records_the_same_events_on_ray(engines: Any, tmp_path: Path) -> None:
    runner = CliRunner()
    outcomes = {}
    for executor in ("local", "ray"):
        store = tmp_path / executor
        before = _workers_made()
        done = runner.invoke(main, [*RUN, "--executor", executor, "--store", str(store)])
        assert done.exit_code == 0, done.output
        outcomes[executor] = json.loads(done.stdout)
        assert (_workers_made() > before) == (executor == "ray")  # played where it was told
    assert outcomes["ray"]["status"] == "finished"
    local = _events(tmp_path / "local", outcomes["local"]["run_id"])
    ray = _events(tmp_path / "ray", outcomes["ray"]["run_id"])
    # The Agent's messages are recorded in chunks as they arrive, which the clock cuts:
    # compared as one conversation, every other event one by one, in order.
    assert _messages(ray) == _messages(local) and _messages(ray)
    ray, local = _facts(ray), _facts(local)
    assert [kind for kind, _ in ray] == [kind for kind, _ in local]
    for (kind, there), (_, here) in zip(ray, local, strict=True):
        assert there == here, kind
    assert sum(kind == "EpisodeCompleted" for kind, _ in ray) == 6
    # The executor is a placement: the Run's config says nothing of it.
    assert "executor" not in json.dumps(ray[0][1])
    assert {k: v for k, v in outcomes["ray"].items() if k != "run_id"} == {
        k: v for k, v in outcomes["local"].items() if k != "run_id"
    }
    # The Run played locally re-evaluates on Ray workers to the same scores, exactly.
    before = _workers_made()
    replayed = runner.invoke(
        main,
        [
            "record",
            "replay",
            outcomes["local"]["run_id"],
            "--reevaluate",
            "--executor",
            "ray",
            "--store",
            str(tmp_path / "local"),
            "--json",
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout)["mismatches"] == []
    assert _workers_made() > before


def test_evaluate_from_another_process_on_the_cluster(cluster: str) -> None:
    """A second driver reaches the cluster by its address: the command a lab types."""
    args = [
        "evaluate",
        "baseline",
        "--benchmark",
        "cartpole",
        "--episodes",
        "4",
        "--seed",
        "3",
        "--json",
    ]
    cli = [sys.executable, "-m", "evopolicygym.cli"]
    there = subprocess.run(
        [*cli, *args, "--executor", "ray", "--ray-address", cluster],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert there.returncode == 0, there.stderr
    here = CliRunner().invoke(main, args)
    assert here.exit_code == 0, here.output
    a, b = json.loads(there.stdout), json.loads(here.stdout)
    assert a["feedback"] == b["feedback"]
    assert [{**e, "duration_s": 0} for e in a["episodes"]] == [
        {**e, "duration_s": 0} for e in b["episodes"]
    ]
    assert a["containment"] == b["containment"] and 1 <= a["jobs"] <= 4  # those placed in time


# Runs the CLI in this interpreter, then writes whether ray was imported to argv[1].
_PROBE = """
import json, runpy, sys
out = sys.argv[1]
sys.argv = ["evopolicy", *sys.argv[2:]]
try:
    runpy.run_module("evopolicygym.cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(out, "w") as f:
    loaded = sorted(m for m in sys.modules if m.partition(".")[0] == "ray")
    json.dump({"code": code, "ray": loaded}, f)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["evaluate", "baseline", "--benchmark", "cartpole", "--episodes", "2", "--json"],
        [
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "reference",
            "--budget",
            "2",
            "--no-validation",
            "--no-assessment",
            "--allow-uncontained-agent",
            "--json",
        ],
    ],
    ids=["help", "evaluate", "run"],
)
def test_the_local_executor_never_imports_ray(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "EVOPOLICY_STORE": str(tmp_path / "store")},
    )
    probe = json.loads(out.read_text())
    assert probe["code"] in (0, None), done.stderr
    assert probe["ray"] == []


# Ray as a machine without the extra has it: not importable.
_NO_RAY = (
    "import sys, runpy; sys.modules['ray'] = None; sys.argv = ['evopolicy', *sys.argv[1:]]; "
    "runpy.run_module('evopolicygym.cli', run_name='__main__', alter_sys=True)"
)


def test_without_the_ray_extra_the_error_says_how_to_install_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _NO_RAY,
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "reference",
            "--budget",
            "2",
            "--executor",
            "ray",
            "--store",
            str(store),
            "--allow-uncontained-agent",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --executor ray:"), done.stderr
    assert "uv sync --extra ray" in lines[0]
    assert not store.exists()  # refused before anything was recorded


def test_a_cluster_out_of_reach_is_refused_at_once(tmp_path: Path) -> None:
    """Ray itself would retry for ever: the command says so in one line instead."""
    require_ray()
    store = tmp_path / "store"
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicygym.cli",
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "reference",
            "--budget",
            "2",
            "--executor",
            "ray",
            "--ray-address",
            f"127.0.0.1:{port}",
            "--store",
            str(store),
            "--allow-uncontained-agent",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        f"error: --executor ray: cannot reach the Ray cluster at 127.0.0.1:{port} "
        "(Connection refused): is `ray start` running there?"
    )
    assert not store.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "baseline", "--benchmark", "cartpole"],
        ["resume", "abc"],
        ["record", "replay", "abc", "--reevaluate"],
    ],
)
def test_a_ray_address_needs_the_ray_executor(command: list[str]) -> None:
    done = CliRunner().invoke(main, [*command, "--ray-address", "127.0.0.1:6379"])
    assert done.exit_code == 2
    assert "--ray-address is only for --executor ray" in done.output

"""`evopolicy experiment run --executor ray`: each Run's Host placed on a node of a Ray cluster.

On a local cluster of a head (no CPUs: it runs nothing) and two worker nodes, each with its
own cache and temporary directories as separate machines would have (``raycluster``):

- a node is SIGKILLed while a Run's Host works there; over a PostgreSQL store the Run is
  placed again on the other node, which never saw it, and carried on from its log (its
  Agent workspace rebuilt there): every cell ends with exactly one Run that finished, every
  Run's budget equals its Episodes, ``record verify`` passes, no Run outside the matrix,
  no Host left running, and the store URL's password in no output and no Ray log;
- over a store directory every node sees, the experiment ends as the local executor's does:
  the same cells, outcomes, budgets and scores;
- without Ray installed, ``--executor ray`` is a one-line error naming the extra, while the
  local executor (the default) runs an experiment without importing Ray.

Skipped where Ray is missing, failed instead under EVOPOLICY_REQUIRE_RAY=1 (``rayutil``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.records.events import RunFinished, RunResumed
from evopolicygym.records.experiments import experiment_runs
from evopolicygym.records.location import open_store
from evopolicygym.records.runs import summarize
from evopolicygym.run.liveness import host_alive
from tests.support import pg
from tests.support.experiments import check_consistent
from tests.support.raycluster import LocalCluster, local_cluster, wait_until
from tests.support.rayutil import require_ray

CLI = [sys.executable, "-m", "evopolicygym.cli"]
TIMEOUT = 600

SPEC = """
name = "{name}"
seeds = {seeds}
[run]
episode_budget = {budget}
[run.validation]
episodes_per_candidate = 2
max_candidates = 1
[run.assessment]
episodes = 2
[[agents]]
provider = "reference"
[[benchmarks]]
id = "cartpole"
[[benchmarks]]
id = "acrobot"
"""


def _spec(tmp_path: Path, name: str, *, seeds: int, budget: int) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(name=name, seeds=seeds, budget=budget))
    return path


def _experiment(spec: Path, store: str, *extra: str) -> list[str]:
    return [
        *CLI,
        "experiment",
        "run",
        str(spec),
        "--store",
        store,
        "--allow-uncontained-agent",
        "--json",
        *extra,
    ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from local_cluster(tmp_path_factory.mktemp("machines"), workers=2)


def _cells(store: str | Path, experiment_id: str) -> dict[str, tuple[Any, ...]]:
    """Per cell: its Run's outcome, budget used, validation and assessment scores."""
    with open_store(store) as opened:
        rows = {}
        for cell_run in experiment_runs(opened.events, experiment_id):
            summary = summarize(opened.events, f"run-{cell_run.run_id}")
            rows[cell_run.cell_id] = (
                cell_run.attempt,
                cell_run.outcome,
                summary.budget_used,
                summary.final_score,
                summary.assessment_score,
            )
    return rows


def _processes_of(machine: Path) -> list[int]:
    """Live processes of the node whose disk is ``machine`` (its XDG_CACHE_HOME, inherited)."""
    marker = f"XDG_CACHE_HOME={machine / 'cache'}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") and _alive_pid(entry):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _alive_pid(entry: Path) -> bool:
    """Not a zombie (a killed process its parent has not reaped yet)."""
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _hosts_of(run_ids: set[str]) -> list[str]:
    """Command lines of live processes carrying any of ``run_ids`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = {a.decode(errors="replace") for a in argv}
        if "resume" in words and words & run_ids:
            found.append(" ".join(sorted(words)))
    return found


def test_on_a_store_directory_ray_ends_the_experiment_as_local_does(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "same", seeds=1, budget=4)
    results = {}
    for executor, extra in (
        ("local", ("--max-runs", "2")),
        ("ray", ("--executor", "ray", "--ray-address", cluster.address)),
    ):
        store = tmp_path / f"store-{executor}"
        done = subprocess.run(
            _experiment(spec, str(store), *extra), capture_output=True, text=True, timeout=TIMEOUT
        )
        assert done.returncode == 0, f"{executor}: {done.stderr[-3000:]}"
        outcome = json.loads(done.stdout)
        assert (outcome["complete"], outcome["runs_started"]) == (True, 2), done.stdout
        check_consistent(store, "same")
        results[executor] = _cells(store, "same")
    assert results["ray"] == results["local"]
    assert {row[1] for row in results["ray"].values()} == {"finished"}


# Runs the CLI with ``import ray`` failing as it does where the extra is not installed.
_NO_RAY = """
import runpy, sys
sys.modules["ray"] = None
sys.argv = ["evopolicy", *sys.argv[1:]]
runpy.run_module("evopolicygym.cli", run_name="__main__", alter_sys=True)
"""


def test_without_ray_the_ray_executor_is_one_line_and_local_needs_none(tmp_path: Path) -> None:
    spec = tmp_path / "one.toml"
    spec.write_text(
        SPEC.format(name="one", seeds=1, budget=2).replace('[[benchmarks]]\nid = "acrobot"\n', "")
    )
    store = str(tmp_path / "store")
    missing = subprocess.run(
        [sys.executable, "-c", _NO_RAY, *_experiment(spec, store, "--executor", "ray")[3:]],
        capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        "error: --executor ray needs Ray, which is not installed: "
        "install it with `uv sync --extra ray`"
    ]
    assert not (tmp_path / "store").exists()  # refused before anything was recorded
    local = subprocess.run(
        [sys.executable, "-c", _NO_RAY, *_experiment(spec, store)[3:]],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert local.returncode == 0, local.stderr[-3000:]
    assert json.loads(local.stdout)["done"] == 1
    usage = subprocess.run(
        [*CLI, "experiment", "run", str(spec), "--ray-address", "127.0.0.1:1"],
        capture_output=True,
        text=True,
    )
    assert usage.returncode == 2 and usage.stderr.strip().splitlines() == [
        "error: --ray-address is for --executor ray"
    ]


@pytest.mark.parametrize(
    ("address", "error"),
    [
        ("127.0.0.1:1", "error: cannot join the Ray cluster at 127.0.0.1:1: connection refused"),
        (
            "head-node",
            "error: the Ray address 'head-node' is not HOST:PORT (as `ray start --head` prints it)",
        ),
    ],
)
def test_a_ray_address_nothing_answers_at_is_one_line_at_once(
    tmp_path: Path, address: str, error: str
) -> None:
    """Ray itself would try to reach it for ever; nothing is recorded."""
    require_ray()
    spec = tmp_path / "one.toml"
    spec.write_text(SPEC.format(name="one", seeds=1, budget=2))
    done = subprocess.run(
        _experiment(spec, str(tmp_path / "store"), "--executor", "ray", "--ray-address", address),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [error]
    assert not (tmp_path / "store").exists()


_CARRY = """
import json, os, sys, time
with open(sys.argv[1] + ".tmp", "w") as f:
    secret = os.environ.get("EVOPOLICY_TEST_SECRET")
    json.dump({"pid": os.getpid(), "secret": secret, "tmp": os.environ.get("TMPDIR")}, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
try:
    time.sleep(120)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(7)
"""


def test_a_carry_gets_its_environment_its_signals_and_dies_with_its_actor(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """RayExecutor alone, with a stand-in for `evopolicy resume`: it runs on a worker node
    (that node's TMPDIR), with the variables given to the executor; Ctrl-C forwarded reaches
    it as KeyboardInterrupt (a Ray worker ignores SIGINT, which its children would inherit);
    and a carry whose actor is killed dies too."""
    from evopolicygym.experiments.ray_executor import RayExecutor

    executor = RayExecutor(address=cluster.address, env={"EVOPOLICY_TEST_SECRET": "s3cret"})
    try:
        assert executor.max_runs == 2  # two worker nodes of one CPU each; the head has none
        report = tmp_path / "first.json"
        executor.start("first", [sys.executable, "-c", _CARRY, str(report)])
        wait_until(report.exists, 120, "the carry's start")
        seen = json.loads(report.read_text())
        assert seen["secret"] == "s3cret"
        assert any(
            seen["tmp"] == str(cluster.machine(node) / "tmp") for node in ("node-1", "node-2")
        ), seen
        executor.signal(signal.SIGINT)
        assert executor.wait() == [("first", 7, "interrupted\n")]
    finally:
        executor.close()
    executor = RayExecutor(address=cluster.address)
    try:
        orphan = tmp_path / "orphan.json"
        executor.start("orphan", [sys.executable, "-c", _CARRY, str(orphan)])
        wait_until(orphan.exists, 120, "the second carry's start")
        pid = json.loads(orphan.read_text())["pid"]
        assert _alive(pid)
    finally:
        executor.close()  # kills the actors still carrying
    wait_until(lambda: not _alive(pid), 60, "the carry's death with its actor")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def test_a_node_killed_mid_experiment_its_runs_finish_on_another(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg.require_postgres()
    # The driver's own machine: a cache apart from the nodes'.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "driver-cache"))
    url = pg.url_of(pg.database_for(tmp_path))
    secret = url.replace("postgres@", "postgres:hunter2@", 1)  # trust auth: any password will do
    try:
        spec = _spec(tmp_path, "faulty", seeds=2, budget=6)
        process = subprocess.Popen(
            _experiment(spec, secret, "--executor", "ray", "--ray-address", cluster.address),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # Killed once a Host on node-1 has its Agent at work (its workspace prepared).
            wait_until(
                lambda: bool(cluster.runs_on("node-1")) or process.poll() is not None,
                TIMEOUT,
                "a Run on node-1",
            )
            assert process.poll() is None, "the experiment ended before a node could be killed"
            cluster.kill("node-1")
            victims = cluster.runs_on("node-1")  # its disk stays: what it held when it died
            # SIGKILL reaches the node's Hosts a moment after remove_node returns: one may still
            # append its RunFinished then. Which Runs the node left unfinished is read once none
            # of its processes lives.
            wait_until(
                lambda: not _processes_of(cluster.machine("node-1")),
                30,
                "node-1's processes to die",
            )
            with open_store(url) as opened:
                unfinished = {
                    run_id
                    for run_id in victims
                    if not isinstance(
                        list(opened.events.read_stream(f"run-{run_id}", 0))[-1].event(), RunFinished
                    )
                }
            assert unfinished, "every Run on node-1 had finished before it was killed"
            # Each lands on node-2, which never saw it: its workspace is rebuilt there.
            seen_on_2: set[str] = set()

            def ended() -> bool:
                seen_on_2.update(cluster.runs_on("node-2"))
                return process.poll() is not None

            wait_until(ended, TIMEOUT, "the experiment's end", interval=0.05)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 0, stderr[-3000:]
        outcome = json.loads(stdout)
        assert (outcome["complete"], outcome["done"], outcome["cells"]) == (True, 4, 4), stdout
        check_consistent(url, "faulty")  # type: ignore[arg-type]  # (a URL opens as a directory does)
        with open_store(url) as opened:
            runs = experiment_runs(opened.events, "faulty")
            assert all(r.attempt == 1 for r in runs), (
                "a Run lost with its node was carried on, not replaced"
            )
            for run_id in unfinished:
                events = [e.event() for e in opened.events.read_stream(f"run-{run_id}", 0)]
                assert any(isinstance(e, RunResumed) for e in events), (
                    run_id
                )  # carried on from its log
            assert not any(host_alive(opened, r.run_id) for r in runs)
        assert unfinished <= seen_on_2, f"not carried on node-2: {unfinished - seen_on_2}"
        assert not _hosts_of({r.run_id for r in runs}), "a Host outlived the experiment"
        assert "hunter2" not in stdout + stderr
        logs = Path(cluster.session_dir) / "logs"
        leaked = [p.name for p in logs.rglob("*") if p.is_file() and b"hunter2" in p.read_bytes()]
        assert not leaked, f"the store URL's password is in Ray's logs: {leaked}"
    finally:
        pg.drop_made()

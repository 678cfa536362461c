"""An experiment killed anywhere finishes, on a re-run, as if it had never been killed.

``evopolicy experiment run`` runs as a subprocess in its own process group and is
SIGKILLed (the whole group: the runner; its Runs' Hosts die with it) once a cell has
ended while others run. The same command again must leave every cell with exactly one
current Run that finished, no Run that no cell names, every Run's budget equal to its
Submissions' Episodes, a store ``record verify`` passes, and an experiment stream that
agrees with the Runs' own. Also: a cell assigned a Run that was never created gets that
very Run; and --retries gives a cell whose Runs fail new Runs, across invocations.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from evopolicygym.experiments.decider import RETRYABLE
from evopolicygym.experiments.spec import load_spec, resolve
from evopolicygym.records.events import (
    CellRunAssigned,
    CellRunEnded,
    ExperimentCreated,
    new_event,
)
from evopolicygym.records.experiments import experiment_runs, experiment_stream_id
from evopolicygym.records.location import open_store
from tests.support.cli import CLI
from tests.support.experiments import TIMEOUT, check_consistent

# Experiments killed and rerun (~100 s): the end-to-end tier (`uv run pytest -m slow`).
pytestmark = pytest.mark.slow


TINY = """
name = "tiny"
seeds = 3
[run]
episode_budget = 4
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


def _spec(tmp_path: Path, text: str = TINY) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def _command(spec: Path, store: Path, *extra: str) -> list[str]:
    return [
        *CLI,
        "experiment",
        "run",
        str(spec),
        "--store",
        str(store),
        "--allow-uncontained-agent",
        "--json",
        *extra,
    ]


def _stream_types(store: Path, experiment_id: str) -> list[str]:
    if not (store / "events.db").exists():
        return []
    with open_store(store) as opened:
        return [e.type for e in opened.events.read_stream(experiment_stream_id(experiment_id), 0)]


def _mid_way(types: list[str]) -> bool:
    """A cell has ended and another Run is under way."""
    ended, assigned = types.count("CellRunEnded"), types.count("CellRunAssigned")
    return ended >= 1 and assigned > ended


def _first_assigned(types: list[str]) -> bool:
    """The first Run was just assigned: it is being created, or its carrier starting."""
    return types.count("CellRunAssigned") >= 1


@pytest.mark.parametrize("moment", [_mid_way, _first_assigned], ids=["mid-way", "first-assigned"])
def test_sigkill_mid_experiment_then_rerun_finishes_every_cell_once(
    tmp_path: Path, moment: Callable[[list[str]], bool]
) -> None:
    spec, store = _spec(tmp_path), tmp_path / "store"
    command = _command(spec, store, "--max-runs", "2")
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if moment(_stream_types(store, "tiny")):
                break
            assert process.poll() is None, "the experiment ended before it could be killed mid-way"
            time.sleep(0.05)
        else:
            raise AssertionError("no cell ended in time")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.stderr is not None
    process.stderr.close()
    types = _stream_types(store, "tiny")
    assert types.count("CellRunEnded") < 6  # killed mid-way indeed
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr
    outcome = json.loads(rerun.stdout)
    assert outcome["complete"] and outcome["done"] == 6
    assert outcome["runs_started"] <= 6 - types.count("CellRunEnded")  # ended cells were skipped
    check_consistent(store, "tiny")
    with open_store(store) as opened:
        assert all(
            r.attempt == 1 for r in experiment_runs(opened.events, "tiny")
        )  # nothing retried
    again = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert again.returncode == 0 and json.loads(again.stdout)["runs_started"] == 0


def test_a_cell_assigned_a_run_never_created_gets_that_run(tmp_path: Path) -> None:
    """The window between CellRunAssigned and the Run's creation, entered on purpose."""
    spec, store = (
        _spec(
            tmp_path,
            TINY.replace("seeds = 3", "seeds = 1").replace('[[benchmarks]]\nid = "acrobot"\n', ""),
        ),
        tmp_path / "store",
    )
    created = resolve(load_spec(spec), spec.parent)
    assert isinstance(created, ExperimentCreated) and len(created.cells) == 1
    stream = experiment_stream_id("tiny")
    with open_store(store, create=True) as opened:
        opened.events.append(stream, [new_event(created, f"{stream}/created")], 0)
        assigned = CellRunAssigned(
            cell_id=created.cells[0].cell_id, run_id="planted-run", attempt=1
        )
        opened.events.append(stream, [new_event(assigned, "planted")], 1)
    ran = subprocess.run(_command(spec, store), capture_output=True, text=True, timeout=TIMEOUT)
    assert ran.returncode == 0, ran.stderr
    check_consistent(store, "tiny")
    with open_store(store) as opened:
        [only] = experiment_runs(opened.events, "tiny")
        assert (only.run_id, only.attempt, only.outcome) == ("planted-run", 1, "finished")


def test_retries_give_a_failing_cell_new_runs_across_invocations(tmp_path: Path) -> None:
    one = TINY.replace("seeds = 3", "seeds = 1").replace('[[benchmarks]]\nid = "acrobot"\n', "")
    text = one.replace("episode_budget = 4", "episode_budget = 4\nmax_agent_attempts = 1") + (
        '[[agents]]\nname = "broken"\nprovider = "command"\nagent_command = "false"\n'
    )
    spec, store = _spec(tmp_path, text), tmp_path / "store"
    first = subprocess.run(
        _command(spec, store, "--retries", "1"), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert first.returncode == 3, first.stderr  # a cell failed past its retries
    outcome = json.loads(first.stdout)
    assert (outcome["done"], outcome["failed"], outcome["complete"]) == (1, 1, False)
    with open_store(store) as opened:
        runs = experiment_runs(opened.events, "tiny")
    broken = [r for r in runs if r.agent == "broken"]
    assert [(r.attempt, r.outcome, r.retryable, r.current) for r in broken] == [
        (1, "agent_failed", True, False),
        (2, "agent_failed", True, True),
    ]
    assert len({r.run_id for r in broken}) == 2
    [reference] = [r for r in runs if r.agent == "reference"]
    assert (reference.attempt, reference.outcome) == (1, "finished")
    # The same retries again: nothing new (two attempts are one retry's worth).
    same = subprocess.run(
        _command(spec, store, "--retries", "1"), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert same.returncode == 3 and json.loads(same.stdout)["runs_started"] == 0
    # More retries: one more Run for the failing cell only.
    more = subprocess.run(
        _command(spec, store, "--retries", "2"), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert more.returncode == 3 and json.loads(more.stdout)["runs_started"] == 1
    status = subprocess.run(
        [*CLI, "experiment", "status", "tiny", "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert status.returncode == 0, status.stderr
    rows = {r["agent"]: r for r in json.loads(status.stdout)["cell_runs"]}
    assert (
        rows["broken"]["attempt"],
        rows["broken"]["status"],
        rows["broken"]["terminal_reason"],
    ) == (3, "agent_failed", "agent_failed")
    assert (
        rows["reference"]["status"] == "finished"
        and rows["reference"]["assessment_score"] is not None
    )
    with open_store(store) as opened:
        ends = [e.event() for e in opened.events.read_stream(experiment_stream_id("tiny"), 0)]
    assert sum(isinstance(e, CellRunEnded) and e.outcome in RETRYABLE for e in ends) == 3


def test_sigint_reaches_the_runs_records_nothing_false_and_a_rerun_goes_on(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the experiment process alone, its Runs being in groups of their own):
    it is passed on, each running Run records its interruption, no cell is recorded as ended
    for them, the command exits 130, and the same command again finishes the matrix."""
    spec, store = _spec(tmp_path), tmp_path / "store"
    command = _command(spec, store, "--max-runs", "2")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and _stream_types(store, "tiny").count("CellRunAssigned") < 2:
        assert process.poll() is None, "the experiment ended before it could be interrupted"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    outcome = json.loads(stdout)
    assert outcome["interrupted"] and not outcome["complete"]
    with open_store(store) as opened:
        runs = experiment_runs(opened.events, "tiny")
        for cell_run in runs:
            types = [e.type for e in opened.events.read_stream(f"run-{cell_run.run_id}", 0)]
            if cell_run.outcome is None:  # not recorded as ended: nor has its Run ended
                assert "RunFinished" not in types, types
                # Stopped while its Host worked, the Run says so; stopped before (the carrying
                # process still starting), it holds only what was done.
                assert types[-1] == "RunInterrupted" or "AgentStarted" not in types, types
            else:
                assert types[-1] == "RunFinished"
        assert any(r.outcome is None for r in runs)
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr
    check_consistent(store, "tiny")

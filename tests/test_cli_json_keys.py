"""One name for one thing across the CLI's --json outputs: a real quick Run, then every
command that tells about it (or about its Benchmark), as subprocesses of the real CLI.
The Run's Benchmark is ``benchmark_id``, its outcome ``status`` and ``terminal_reason``,
its Submissions ``best_submission_id`` and ``final_submission_id``, its refusals
``rejections``, and each says the same value wherever it appears."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CLI, SMALL

# What some commands used to call these, before one name each.
OLD_KEYS = {
    "benchmark",
    "name",
    "id",
    "terminal",
    "final_submission",
    "best_train_submission",
    "rejected_submissions",
}


def _json(*args: str) -> Any:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = str(tmp_path_factory.mktemp("keys") / "store")
    ran = _json("run", "--benchmark", "cartpole", *SMALL, "--store", store, "--json")
    run_id = ran["run_id"]
    [listed] = _json("record", "list", "--store", store, "--json")
    return {
        "run": ran,
        "resume": _json("resume", run_id, "--store", store, "--json"),
        "list": listed,
        "show": _json("record", "show", run_id, "--store", store, "--json"),
        "replay": _json("record", "replay", run_id, "--store", store, "--json"),
    }


def test_the_run_is_told_with_the_same_keys_and_values(outputs: dict[str, Any]) -> None:
    run = outputs["run"]
    assert run["benchmark_id"] == "cartpole"
    assert run["status"] == run["terminal_reason"] == "finished"
    assert isinstance(run["final_submission_id"], int) and isinstance(
        run["best_submission_id"], int
    )
    assert run["rejections"] == 0
    assert outputs["resume"] == run  # a Run that has ended: resume tells its outcome again
    shared = {
        "run_id": ("run", "resume", "list", "show", "replay"),
        "benchmark_id": ("run", "resume", "list", "show", "replay"),
        "status": ("run", "resume", "list", "show", "replay"),
        "terminal_reason": ("run", "resume", "list", "show", "replay"),
        "assessment_score": ("run", "resume", "list", "show", "replay"),
        "best_submission_id": ("run", "resume", "show", "replay"),
        "final_submission_id": ("run", "resume", "show", "replay"),
        "rejections": ("run", "resume", "show", "replay"),
        "validation_score": ("run", "resume", "show"),
        "budget_used": ("run", "resume", "show", "replay"),
        "episode_budget": ("run", "resume", "show", "replay"),
        "stream_id": ("list", "show", "replay"),
        "events": ("list", "show", "replay"),
    }
    for key, commands in shared.items():
        values = {command: outputs[command][key] for command in commands}
        assert len({json.dumps(v) for v in values.values()}) == 1, (key, values)
    assert outputs["show"]["final_selection"]["score"] == run["validation_score"]
    for command, view in outputs.items():
        assert not OLD_KEYS & set(view), (command, OLD_KEYS & set(view))


def test_a_benchmark_is_benchmark_id_everywhere(tmp_path: Path) -> None:
    listed = {row["benchmark_id"] for row in _json("benchmarks", "list", "--json")}
    assert "cartpole" in listed
    shown = _json("benchmarks", "show", "cartpole", "--json")
    checked = _json("benchmarks", "check", "cartpole", "--json")
    evaluated = _json(
        "evaluate",
        "baseline",
        "--benchmark",
        "cartpole",
        "--episodes",
        "1",
        "--jobs",
        "1",
        "--json",
    )
    for view in (shown, checked, evaluated):
        assert view["benchmark_id"] == "cartpole"
        assert not OLD_KEYS & set(view)
    # Each Episode as the log and the exports name it; the Agent's feedback keeps its own words.
    [episode] = evaluated["episodes"]
    assert {"total_reward", "steps"} <= set(episode)
    [fed_back] = evaluated["feedback"]["content"]["episodes"]
    assert (fed_back["return"], fed_back["length"]) == (episode["total_reward"], episode["steps"])

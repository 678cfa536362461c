"""``evopolicy experiment summary``: the leaderboard and diagnostics of an experiment.

Recorded Runs (tests/support/runlogs.py) named by an experiment stream: two agents on one
Benchmark, one cell retried, one Run with no Assessment score. The figures are the
analysis diagnostics' (tested by hand in test_analysis_diagnostics.py); here the command
shows them, as text and as JSON, and refuses what it cannot read in one line.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from evopolicygym.cli.group import main
from evopolicygym.records.location import open_store
from tests.support.runlogs import synth_run, write_experiment, write_run


def invoke(*args: str) -> Result:
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    return CliRunner(**options).invoke(main, list(args))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("summary") / "store"
    # A real Run whose Agent fails at once: nothing handed off, so no Assessment score.
    ran = invoke(
        "run",
        "--benchmark",
        "cartpole",
        "--agent",
        "command",
        "--agent-command",
        "false",
        "--budget",
        "4",
        "--allow-uncontained-agent",
        "--store",
        str(root),
        "--json",
    )
    failed = json.loads(ran.stdout)
    assert failed["status"] == "agent_failed", ran.output
    with open_store(root) as opened:
        write_run(opened, synth_run("a1"))  # assessment 42
        write_run(opened, synth_run("a2", assessment_score=40.0))
        write_run(opened, synth_run("b1", assessment_score=30.0))
        write_run(opened, synth_run("b2-first", assessment_score=99.0))
        write_experiment(
            opened,
            [
                ("ref", "toy", 0, 0, [("a1", "finished")]),
                ("ref", "toy", 1, 0, [("a2", "finished")]),
                ("alt", "toy", 0, 0, [("b1", "finished")]),
                # Retried: only the current attempt (the failed Run) stands for the cell.
                (
                    "alt",
                    "toy",
                    1,
                    0,
                    [("b2-first", "agent_failed"), (failed["run_id"], "agent_failed")],
                ),
            ],
        )
    return str(root)


def test_json_holds_every_figure_over_each_cells_current_run(store: str) -> None:
    result = invoke("experiment", "summary", "demo", "--store", store, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["experiment_id"] == "demo" and found["runs"] == 4  # b2-first was retried
    assert [(r["agent"], r["rank_score"]) for r in found["leaderboard"]] == [
        ("ref", 1.0),
        ("alt", 0.0),
    ]
    scores = {r["agent"]: r for r in found["scores"]}
    assert (scores["ref"]["mean"], scores["ref"]["sd"], scores["ref"]["scored"]) == (
        41.0,
        pytest.approx(2**0.5),
        2,
    )
    half = 12.706 * 2**0.5 / 2**0.5  # t(0.975, 1) * sd / sqrt(n)
    assert scores["ref"]["ci_low"] == pytest.approx(41.0 - half)
    # alt's second cell handed nothing off: counted, not scored.
    assert (scores["alt"]["runs"], scores["alt"]["scored"], scores["alt"]["unscored"]) == (2, 1, 1)
    assert scores["alt"]["mean"] == 30.0 and scores["alt"]["sd"] is None
    assert {r["benchmark"] for r in found["selection_validity"]["benchmarks"]} == {"toy"}
    assert {(r["agent"], r["runs"]) for r in found["improvement_efficiency"]["groups"]} == {
        ("alt", 2),
        ("ref", 2),
    }
    edits = {r["agent"]: r for r in found["edit_dynamics"]}
    assert (
        edits["ref"]["submissions"] == 12 and edits["ref"]["hits"] == 4
    )  # 2 and 6 beat their parents
    budget = {r["agent"]: r for r in found["budget_use"]}
    assert budget["alt"]["terminal_reasons"] == {"agent_failed": 1, "finished": 1}


def test_text_shows_the_leaderboard_then_each_diagnostic(store: str) -> None:
    result = invoke("experiment", "summary", "demo", "--store", store)
    assert result.exit_code == 0, result.output
    out = result.stdout
    order = [
        "Leaderboard of demo",
        "Selection validity",
        "Improvement efficiency",
        "Edit dynamics",
        "Budget use",
    ]
    assert [out.index(title) for title in order] == sorted(out.index(title) for title in order)
    board = out[: out.index("Selection validity")]
    assert board.index("ref") < board.index("alt")
    assert "41 ± 1.414 [28.29, 53.71] n=2/2" in " ".join(board.split())
    assert "30 n=1/2" in " ".join(board.split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nope"], "no experiment 'nope'"),
        (["demo", "--store", "{missing}"], "no store"),
    ],
)
def test_what_cannot_be_read_is_one_line_and_a_non_zero_exit(
    store: str, tmp_path: Path, args: list[str], says: str
) -> None:
    argv = [a.replace("{missing}", str(tmp_path / "missing")) for a in args]
    if "--store" not in argv:
        argv += ["--store", store]
    result = invoke("experiment", "summary", *argv)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr


def test_an_experiment_without_runs_yet_summarizes_to_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as opened:
        write_experiment(opened, [("ref", "toy", 0, 0, [("never-made", "create_failed")])])
    result = invoke("experiment", "summary", "demo", "--store", str(root), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["runs"] == 0 and found["leaderboard"] == [] and found["scores"] == []
    assert invoke("experiment", "summary", "demo", "--store", str(root)).exit_code == 0

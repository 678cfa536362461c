"""What the CLI prints for people, at 80 columns and piped: identifiers whole, tables that
fit (or turn vertical), values without Python reprs. Every check runs the real CLI in a
subprocess, its stdout a pipe and COLUMNS set, as `COLUMNS=80 evopolicy ... | cat` does."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import cli

PYTHON_VALUES = ("None", "{'", "['", "True", "False")


def ok(*args: str, columns: int = 80) -> str:
    done = cli(*args, columns=columns)
    assert done.code == 0, done.stderr
    return done.stdout


def assert_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert len(line.rstrip()) <= width, line


@dataclass(frozen=True)
class Runs:
    store: str
    finished: str  # a Run of the reference Agent, through Validation and Assessment
    failed: str  # a Run whose Agent failed before any submission


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    store = str(tmp_path_factory.mktemp("output") / "store")
    common = (
        "run",
        "--benchmark",
        "cartpole",
        "--store",
        store,
        "--allow-uncontained-agent",
        "--json",
    )
    finished = cli(
        *common,
        "--budget", "3", "--validation-episodes", "1", "--assessment-episodes", "1",
        "--max-candidates", "2",
    )  # fmt: skip
    assert finished.code == 0, finished.stderr
    failed = cli(*common, "--budget", "8", "--agent", "command", "--agent-command", "false")
    assert failed.code != 0
    return Runs(store, json.loads(finished.stdout)["run_id"], json.loads(failed.stdout)["run_id"])


@pytest.mark.parametrize("columns", [80, 40])
def test_record_list_prints_run_ids_whole(runs: Runs, columns: int) -> None:
    out = ok("record", "--store", runs.store, "list", columns=columns)
    assert_fits(out, columns)
    for run_id in (runs.finished, runs.failed):
        # whole, on one line, with no rule character stuck to it
        assert re.search(rf"(^|\s){re.escape(run_id)}(\s|$)", out, re.MULTILINE), out
    assert "…" not in out
    for word in (
        "created",
        "benchmark",
        "agent",
        "status",
        "cartpole",
        "reference",
        "agent_failed",
    ):
        assert word in out


def test_record_list_at_80_columns_is_one_line_a_run(runs: Runs) -> None:
    lines = ok("record", "--store", runs.store, "list").splitlines()
    [finished] = [line for line in lines if runs.finished in line]
    assert finished.split()[-1] == "finished" and "cartpole" in finished and "reference" in finished


def test_record_show_renders_values_for_people(runs: Runs) -> None:
    out = ok("record", "--store", runs.store, "show", runs.finished)
    assert_fits(out, 80)
    for value in PYTHON_VALUES:
        assert value not in out, value
    rows = {line[:17].strip(): line[17:].strip() for line in out.splitlines() if line[:1].strip()}
    assert rows["agent"] == "reference"  # not "reference reference"
    assert rows["budget"] == "3 Episodes, 3 used, 0 left"
    assert rows["config"].startswith("agent_timeout=3600, assessment.candidates=no,")
    assert "assessment.enabled=yes," in out and "assessment.episodes=1," in out and "jobs=-," in out
    summary = json.loads(ok("record", "--store", runs.store, "show", runs.finished, "--json"))
    assert rows["final"] == (
        f"submission {summary['final_submission_id']}, "
        f"validation score {summary['validation_score']:g}"
    )


def test_record_show_tells_the_budget_of_a_run_with_no_submission(runs: Runs) -> None:
    out = ok("record", "--store", runs.store, "show", runs.failed)
    assert "budget           8 Episodes, 0 used, 8 left" in out
    assert " - left" not in out
    for value in PYTHON_VALUES:
        assert value not in out, value


def test_record_events_show_list_values(runs: Runs) -> None:
    out = ok("record", "--store", runs.store, "events", runs.finished)
    events = [
        json.loads(line)
        for line in ok(
            "record", "--store", runs.store, "events", runs.finished, "--json"
        ).splitlines()
    ]
    [finish] = [e["payload"] for e in events if e["type"] == "FinishAccepted"]
    [line] = [line for line in out.splitlines() if "FinishAccepted" in line]
    shown = ", ".join(str(c) for c in finish["candidates"])
    assert f"candidates=[{shown}]" in line
    assert "None" not in out and "{'" not in out


def test_query_select_star_turns_vertical_when_too_wide(runs: Runs) -> None:
    columns = json.loads(
        ok("query", "--store", runs.store, "SELECT * FROM runs LIMIT 1", "--json")
    )[0]
    out = ok("query", "--store", runs.store, "SELECT * FROM runs")
    assert_fits(out, 80)
    assert "…" not in out
    lines = out.splitlines()
    for name in columns:  # every column name readable, at the start of its line
        assert any(line.split()[:1] == [name] for line in lines if line.strip()), name
    assert f"run_id               {runs.finished}" in out or re.search(
        rf"^run_id\s+{re.escape(runs.finished)}$", out, re.MULTILINE
    )
    assert lines[-1] == "2 rows"
    assert "True" not in out and "False" not in out


def test_query_narrow_selection_is_a_table(runs: Runs) -> None:
    out = ok("query", "--store", runs.store, "SELECT run_id, status FROM runs ORDER BY created_at")
    lines = out.splitlines()
    assert lines[0].split() == ["run_id", "status"]
    assert lines[2].split() == [runs.finished, "finished"]
    assert lines[3].split() == [runs.failed, "agent_failed"]


def test_agents_list_never_breaks_a_name() -> None:
    rows = json.loads(ok("agents", "list", "--json"))
    out = ok("agents", "list")
    assert_fits(out, 80)
    words = set(out.split())
    for row in rows:
        assert row["name"] in words
        for name in [*row["options"], *(entry.split()[0] for entry in row["inherits"])]:
            assert name in words, name  # whole, not folded across lines


def test_evaluate_prints_the_score_last_and_folds_many_episodes(tmp_path: Path) -> None:
    out = ok("evaluate", "baseline", "--benchmark", "cartpole", "--episodes", "30", "--jobs", "2")
    assert_fits(out, 80)
    lines = [line.rstrip() for line in out.splitlines() if line.strip()]
    episodes = [line for line in lines if re.match(r"^\d+\s+ok\s", line)]
    assert [int(line.split()[0]) for line in episodes] == list(range(20))
    assert "… 10 more Episodes (all ok); --json lists every one" in lines
    assert lines[-1].startswith("score ") and lines[-1].endswith("(maximize)")
    assert "failures     0 of 30 Episodes" in lines


def test_evaluate_shows_failed_episodes_first_when_folding(tmp_path: Path) -> None:
    (tmp_path / "policy.py").write_text(
        "class Push:\n"
        "    def act(self, observation):\n"
        "        return 0\n"
        "def make_policy(context):\n"
        "    if context.policy_seed % 4 == 0:\n"
        "        raise RuntimeError('boom')\n"
        "    return Push()\n"
    )
    done = cli("evaluate", str(tmp_path), "--benchmark", "cartpole", "--episodes", "30", "--json")
    data = json.loads(done.stdout)
    failed = [e["index"] for e in data["episodes"] if e["status"] != "ok"]
    assert failed, data
    out = ok("evaluate", str(tmp_path), "--benchmark", "cartpole", "--episodes", "30")
    shown = [int(line.split()[0]) for line in out.splitlines() if re.match(r"^\d+\s+\w+\s", line)]
    assert len(shown) == 20 and set(failed) <= set(shown)
    assert "… 10 more Episodes (all ok); --json lists every one" in out


def test_run_summary_renders_values_for_people(tmp_path: Path) -> None:
    done = cli(
        "run", "--benchmark", "cartpole", "--budget", "8", "--agent", "command",
        "--agent-command", "false", "--allow-uncontained-agent", "--store", str(tmp_path / "store"),
    )  # fmt: skip
    assert done.code == 3, done.stderr
    for value in PYTHON_VALUES:
        assert value not in done.stderr, value
    assert "agent exited (exited, code 1)" in done.stderr  # the live view's log: on stderr
    for value in PYTHON_VALUES:
        assert value not in done.stdout, value
    rows = {  # the outcome: on stdout
        " ".join(line.split()[:-1]): line.split()[-1]
        for line in done.stdout.splitlines()
        if line.split() and not line.startswith("replay")
    }
    assert rows["episode budget"] == "8" and rows["budget used"] == "0"
    assert rows["success"] == "no" and rows["best train score"] == "-"
    assert re.search(r"^improved +not measured *$", done.stdout, re.MULTILINE)
    assert "episode budget" not in done.stderr


@pytest.mark.parametrize("benchmark", ["cartpole", "gymnasium:CartPole-v1"])
def test_benchmarks_show_renders_values_for_people(benchmark: str) -> None:
    spec = json.loads(ok("benchmarks", "show", benchmark, "--json"))
    out = ok("benchmarks", "show", benchmark)
    assert_fits(out, 80)
    for value in PYTHON_VALUES:
        assert value not in out, value
    assert "env_id: CartPole-v1" in out  # metadata, a line per key
    assert "observation: [cart position, cart velocity," in out  # brackets are text, not markup
    assert "[train, validation, assessment]" in out
    if spec["baseline"] is None:
        assert re.search(r"^baseline\s+none packaged\s*$", out, re.MULTILINE)


@pytest.mark.parametrize("columns", [80, 40])
def test_benchmarks_list_never_breaks_a_name(columns: int) -> None:
    names = [row["benchmark_id"] for row in json.loads(ok("benchmarks", "list", "--json"))]
    out = ok("benchmarks", "list", columns=columns)
    assert_fits(out, columns)
    starts = {line.split()[0] for line in out.splitlines() if line.strip()}
    starts |= {line.split()[1] for line in out.splitlines() if line.startswith("name ")}
    for name in names:
        assert name in starts, name

"""A newcomer's frictions (issue 27), each held by a test that fails without its fix: a RUN
given as ``latest`` or a unique prefix, results on stdout and progress on stderr, one line
per finished Run of a piped ``experiment run``, ``evaluate``'s exit status when every
Episode failed, a failed Episode shown at the score it counted at, and an export that says
when a split came out empty."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from evopolicygym.cli.evaluate import EXIT_ALL_FAILED
from evopolicygym.program import Program
from evopolicygym.records.events import (
    AgentStarted,
    EpisodeCompleted,
    EvaluationStarted,
    RunCreated,
    new_event,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.runs import AmbiguousRun, UnknownRun, latest_run, resolve_run, run_id_of
from evopolicygym.records.store import EventStore
from tests.support import pg
from tests.support.backends import (
    every_backend,  # noqa: F401 (the fixture open_backend)
)
from tests.support.cli import CLI, SMALL, cli, invoke, one_line_error
from tests.support.policies import CRASHING_POLICY
from tests.support.record_store import Built, Writer, build_store, run_created, store_args
from tests.support.runlogs import standard_run, write_run

# --------------------------------------------------------------------------- RUN: latest, prefixes


def _created(run_id: str) -> RunCreated:
    return run_created(run_id, "sha256:" + "a" * 64)


def _append(store: EventStore, stream: str, *events: Any) -> None:
    version = next((s.version for s in store.streams(stream) if s.stream_id == stream), 0)
    batch = [new_event(e, f"{stream}/{version + i + 1}") for i, e in enumerate(events)]
    store.append(stream, batch, version)


def test_a_run_is_named_by_id_latest_or_a_unique_prefix(event_store: EventStore) -> None:
    with pytest.raises(UnknownRun):
        resolve_run(event_store, "latest")  # no Run yet
    _append(event_store, "run-alpha", _created("alpha"))
    _append(event_store, "run-alpine", _created("alpine"))
    _append(event_store, "run-beta", _created("beta"))
    _append(event_store, "run-alp", _created("alp"))
    # The latest Run is the last created, not the last written to, nor another stream.
    _append(event_store, "run-alpha", AgentStarted(attempt=1))
    _append(event_store, "host-1", AgentStarted(attempt=1))
    assert latest_run(event_store) == "run-alp"
    assert resolve_run(event_store, "latest") == "run-alp"
    assert resolve_run(event_store, "alpha") == resolve_run(event_store, "run-alpha") == "run-alpha"
    assert resolve_run(event_store, "alph") == "run-alpha"
    assert resolve_run(event_store, "run-alpi") == "run-alpine"
    assert resolve_run(event_store, "b") == "run-beta"
    assert resolve_run(event_store, "alp") == "run-alp"  # a whole id wins over a prefix
    with pytest.raises(AmbiguousRun) as ambiguous:
        resolve_run(event_store, "al")
    assert ambiguous.value.matches == ["alp", "alpha", "alpine"]
    assert "'al' is the start of 3 run ids (alp, alpha, alpine)" in str(ambiguous.value)
    for unknown in ("gamma", "", "host-1", "run"):
        with pytest.raises(UnknownRun):
            resolve_run(event_store, unknown)


def test_latest_reads_only_the_log_after_the_last_creation(event_store: EventStore) -> None:
    """Found from the log's head back: the many Runs before the latest are never read."""
    for n in range(40):
        _append(event_store, f"run-r{n:03}", _created(f"r{n:03}"), *[AgentStarted(attempt=1)] * 20)
    _append(event_store, "run-last", _created("last"))
    for _ in range(30):  # a long tail of another Run's events after it
        _append(event_store, "run-r000", *[AgentStarted(attempt=2)] * 10)
    read: list[int] = []
    rows = event_store.read_event_rows

    def counted(from_position: int = 0, limit: int = 10_000) -> list[Any]:
        found = rows(from_position, limit)
        read.append(len(found))
        return found

    event_store.read_event_rows = counted  # type: ignore[method-assign]
    assert resolve_run(event_store, "latest") == "run-last"
    assert event_store.head() == 40 * 21 + 1 + 300
    assert sum(read) <= 256 + 1024  # two pages back of 1141 events, never the whole log


@pytest.fixture
def alpine(tmp_path: Path) -> Built:
    """``build_store``'s Runs (alpha, finished; beta) and a third, alpine, created last."""
    built = build_store(tmp_path / "store")
    with open_store(built.root) as store:
        initial = store.blobs.put_program(
            Program.from_files({"policy.py": "def make_policy(c): ..."})
        )
        Writer(store).append("run-alpine", run_created("alpine", initial, blobs=store.blobs))
    return built


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["show", "latest", "--json"], '"run_id": "alpine"'),
        (["show", "alph", "--json"], '"run_id": "alpha"'),
        (["show", "run-b", "--json"], '"run_id": "beta"'),
        (["events", "latest", "--json"], '"stream_id":"run-alpine"'),
        (["verify", "latest"], "ok: 1 events"),
        (["checkout", "latest", "initial", "{out}"], "of run alpine"),
        (["replay", "alph"], "run alpha"),
        (["logs", "alph"], "attempt 1"),
    ],
)
def test_every_record_command_takes_latest_and_a_prefix(
    alpine: Built, tmp_path: Path, args: list[str], says: str
) -> None:
    args = [arg.replace("{out}", str(tmp_path / "out")) for arg in args]
    result = invoke(*store_args(alpine, *args))
    assert says in result.stdout + result.stderr, (result.stdout, result.stderr)
    assert "no run" not in result.stderr


def test_report_and_resume_take_latest_and_a_prefix(alpine: Built, tmp_path: Path) -> None:
    report = invoke("report", "latest", "-o", str(tmp_path / "r.html"), "--store", str(alpine.root))
    assert report.exit_code == 0, report.stderr
    assert "alpine" in (tmp_path / "r.html").read_text()
    resumed = invoke("resume", "alph", "--store", str(alpine.root))
    assert "the Run alpha has already ended (finished): nothing to resume" in resumed.stderr


def test_an_ambiguous_prefix_is_one_line_naming_the_matches(alpine: Built) -> None:
    for args in (["record", "show", "al"], ["resume", "al"], ["record", "events", "al"]):
        line = one_line_error(invoke(*args, "--store", str(alpine.root)))
        assert "'al' is the start of 2 run ids (alpha, alpine): give more of one" in line, line
    line = one_line_error(invoke(*store_args(alpine, "show", "gamma")))
    assert line.startswith("error: no run 'gamma' in the store at"), line


def test_latest_on_a_postgresql_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pg.require_postgres()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    url = pg.url_of(pg.database_for(tmp_path))
    try:
        build_store(url)  # type: ignore[arg-type]
        shown = invoke("record", "show", "latest", "--json", "--store", url)
        assert shown.exit_code == 0, shown.stderr
        assert '"run_id": "beta"' in shown.stdout
        assert '"run_id": "alpha"' in invoke("record", "show", "a", "--json", "--store", url).stdout
    finally:
        pg.drop_made()


# --------------------------------------------------------------------------- results on stdout


def test_run_and_resume_print_their_outcome_on_stdout_and_their_progress_on_stderr(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "store")
    ran = cli(
        "run", "--benchmark", "cartpole", *SMALL, "--allow-uncontained-agent", "--store", store
    )
    assert ran.code == 0, ran.stderr
    resumed = cli("resume", "latest", "--store", store)
    assert resumed.code == 0, resumed.stderr
    for done in (ran, resumed):
        assert re.search(r"^status +finished *$", done.stdout, re.MULTILINE), done.stdout
        assert re.search(r"^episode budget +4 *$", done.stdout, re.MULTILINE), done.stdout
        assert "replay it: " in done.stdout
        assert "episode budget" not in done.stderr and "status" not in done.stderr
    assert "submission 1" in ran.stderr and "run finished: finished" in ran.stderr  # the live log
    # Piped, an event's line is not folded at 80 columns: one event, one line.
    finished = re.search(r"^run finished: .*$", ran.stderr, re.MULTILINE)
    assert finished and finished.group().endswith(")") and len(finished.group()) > 80, ran.stderr
    assert "has already ended (finished): nothing to resume" in resumed.stderr


# --------------------------------------------------------------------------- experiment run, piped

TWO_AGENTS = """
name = "piped"
profile = "quick"
[run]
episode_budget = 4
[run.validation]
episodes_per_candidate = 2
max_candidates = 1
[run.assessment]
episodes = 2
[[agents]]
provider = "reference"
[[agents]]
name = "broken"
provider = "command"
agent_command = "false"
[[benchmarks]]
id = "cartpole"
"""


def test_a_piped_experiment_run_prints_a_line_per_run_as_it_ends(tmp_path: Path) -> None:
    """Off a terminal, each Run is told as it ends: its cell, id, how it ended, its score; a
    Run ended by a fault and retried is told too. The count follows, on stdout as well."""
    (tmp_path / "spec.toml").write_text(TWO_AGENTS)
    store = str(tmp_path / "store")
    process = subprocess.Popen(
        [*CLI, "experiment", "run", "spec.toml", "--store", store, "--max-runs", "1",
         "--allow-uncontained-agent"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert process.stdout is not None
    first = process.stdout.readline()
    still_running = process.poll() is None  # the first line came before the last Run ended
    rest, stderr = process.communicate(timeout=600)
    assert process.returncode == 3, stderr  # the broken agent's cell failed past its retry
    assert still_running, first
    lines = (first + rest).splitlines()
    status = json.loads(cli("experiment", "status", "piped", "--store", store, "--json").stdout)
    cells = {row["agent"]: row for row in status["cell_runs"]}
    good = cells["reference"]
    assert good["status"] == "finished" and good["assessment_score"] is not None
    assert (
        f"reference/cartpole/seed=0/agent_seed=0: run {good['run_id']} finished, "
        f"assessment {good['assessment_score']:g}"
    ) in lines
    with open_store(store) as opened:
        broken_runs = [
            run_id_of(info.stream_id) for info in opened.events.streams("run-")
            if run_id_of(info.stream_id) != good["run_id"]
        ]  # fmt: skip
    assert len(broken_runs) == 2  # the first and its retry
    for run_id in broken_runs:
        assert f"broken/cartpole/seed=0/agent_seed=0: run {run_id} agent_failed, no score" in lines
    assert len(lines) == 4, lines  # three Runs, then the count
    assert lines[-1].startswith("experiment piped: 1 of 2 cells ended with an outcome, 1 failed")
    assert "ended with an outcome" not in stderr
    footer = cli("experiment", "status", "piped", "--store", store)
    assert footer.stdout.splitlines()[-1] == "1 of 2 cells ended with an outcome; 0 have no Run yet"


# --------------------------------------------------------------------------- failed Episodes

# Fails the Episodes whose policy seed is even (of evaluation seed 0's first eight: some, not all).
SOME_FAIL = """
def make_policy(context):
    if context.policy_seed % 2 == 0:
        raise RuntimeError("even seed")
    return Zero()


class Zero:
    def act(self, observation):
        return 0
"""


def test_evaluate_exits_3_when_every_episode_failed_and_shows_the_failure_score(
    tmp_path: Path,
) -> None:
    """acrobot's failure score is -500: a failed Episode is shown at it, never at the 0 it
    played; every Episode failed is exit status 3, documented in --help."""
    (tmp_path / "policy.py").write_text(CRASHING_POLICY)
    args = ("evaluate", str(tmp_path), "--benchmark", "acrobot", "--episodes", "2", "--jobs", "1")
    shown = invoke(*args)
    assert shown.exit_code == EXIT_ALL_FAILED == 3, shown.output
    rows = [
        line.split() for line in shown.stdout.splitlines() if line.split()[:1] in (["0"], ["1"])
    ]
    assert [row[:5] for row in rows] == [
        [str(i), "exception", "-500", "(failure", "score)"] for i in (0, 1)
    ]
    assert "every Episode failed (2 of 2)" in shown.stderr
    as_json = invoke(*args, "--json")
    assert as_json.exit_code == 3
    data = json.loads(as_json.stdout)
    assert [e["scored_return"] for e in data["episodes"]] == [-500.0, -500.0]
    assert [e["total_reward"] for e in data["episodes"]] == [0.0, 0.0]  # as played, as recorded
    assert data["feedback"]["score"] == -500.0
    helped = invoke("evaluate", "--help").stdout
    assert "Exit status:" in helped
    assert "3    every Episode failed: the score is only the Benchmark's failure score" in helped


def test_evaluate_with_some_episodes_failed_exits_0(tmp_path: Path) -> None:
    (tmp_path / "policy.py").write_text(SOME_FAIL)
    args = ("evaluate", str(tmp_path), "--benchmark", "acrobot", "--episodes", "8", "--jobs", "1")
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert 0 < data["failures"] < 8
    for episode in data["episodes"]:
        played = episode["total_reward"]
        assert episode["scored_return"] == (played if episode["status"] == "ok" else -500.0)
    assert data["feedback"]["score"] == sum(e["scored_return"] for e in data["episodes"]) / 8


def test_record_events_show_a_failed_episode_at_its_failure_score(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        created = _created("crashy")
        spec = {**created.benchmark_spec, "failure_score": -500.0}
        Writer(store).append(
            "run-crashy",
            msgspec.structs.replace(created, benchmark_spec=spec),
            EvaluationStarted(
                submission_id=1,
                program_digest=created.initial_program_digest,
                parent_program_digest=created.initial_program_digest,
                indices=[0, 1],
                budget_reserved=2,
                budget_used=2,
            ),
            EpisodeCompleted(
                submission_id=1, index=0, status="exception", total_reward=0.0, steps=0
            ),
            EpisodeCompleted(submission_id=1, index=1, status="ok", total_reward=-87.0, steps=88),
        )
    result = invoke("record", "events", "latest", "--store", str(tmp_path / "store"))
    assert result.exit_code == 0, result.stderr
    failed, completed = [line for line in result.stdout.splitlines() if "EpisodeCompleted" in line]
    assert (
        "EpisodeCompleted         total_reward=0 (failed: scored at the failure score -500) "
        in failed
    )
    assert "scored" not in completed and "total_reward=-87" in completed


# --------------------------------------------------------------------------- empty export splits


def test_an_export_whose_split_comes_out_empty_says_so_and_what_changes_it(tmp_path: Path) -> None:
    """One task (a few Runs of one Benchmark are often that): at the default test fraction
    it hashes to train, so the test split is empty; one warning line names --test-fraction
    and --split-by, and the manifest and --json report record it."""
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        write_run(store, standard_run("alpha"))
        write_run(store, standard_run("beta"))
    out = tmp_path / "out"
    result = invoke(
        "export", "--format", "sft", "--format", "programs", "-o", str(out), "--store", str(root)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        "warning: sft, programs: the test split is empty: its only split group (by task) hashes "
        "to train at --test-fraction 0.1; raise --test-fraction, or --split-by run"
    ]
    manifest = json.loads((out / "export.json").read_text())
    assert {name: c["empty_splits"] for name, c in manifest["configs"].items()} == {
        "programs": ["test"],
        "sft": ["test"],
    }
    again = invoke("export", "--format", "sft", "-o", str(out), "--store", str(root), "--json")
    assert again.exit_code == 0  # unchanged, and still told
    assert "the test split is empty" in again.stderr
    assert json.loads(again.stdout)["warnings"] == [
        "sft: the test split is empty: its only split group (by task) hashes to train at "
        "--test-fraction 0.1; raise --test-fraction, or --split-by run"
    ]
    most = invoke(
        "export",
        "--format",
        "sft",
        "-o",
        str(tmp_path / "most"),
        "--store",
        str(root),
        "--test-fraction",
        "0.99",
    )
    assert most.stderr.splitlines() == [
        "warning: sft: the train split is empty: its only split group (by task) hashes to test "
        "at --test-fraction 0.99; lower --test-fraction"
    ]
    asked = invoke(
        "export",
        "--format",
        "sft",
        "-o",
        str(tmp_path / "none"),
        "--store",
        str(root),
        "--test-fraction",
        "0",
    )
    assert asked.exit_code == 0 and asked.stderr == ""  # no test split was asked for

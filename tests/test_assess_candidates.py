"""``--assess-candidates``: every validated candidate assessed on the selected one's
Assessment Episodes, for a study of selection validity.

Real reference-Agent Runs on cartpole (max_candidates 3, so several candidates): with the
option every other validated candidate gets a ``CandidateAssessed`` on the same Episodes,
the selection and the Run's assessment score stay the selected one's; without it nothing
changes. The read API, read models, dataframes and experiment summary carry the scores;
the decider refuses an impossible ``CandidateAssessed``; a Host killed mid-way resumes
without assessing a candidate twice, and a candidate whose Assessment fails does not fail
the Run.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from evopolicygym.analysis import diagnostics, runs_df, submissions_df
from evopolicygym.analysis.diagnostics import spearman
from evopolicygym.cli.group import main
from evopolicygym.records.events import (
    AgentMessages,
    AssessmentCompleted,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    Event,
    FinalSubmissionSelected,
    RunCreated,
    RunFinished,
    RunResumed,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.read_models import open_read_models, refresh
from evopolicygym.records.runs import summarize
from evopolicygym.records.verify import verify_store
from evopolicygym.run.config import AssessmentConfig, RunConfig
from evopolicygym.run.decider import InvalidTransition, fold
from evopolicygym.run.ledger import load_run
from evopolicygym.run.liveness import host_alive
from evopolicygym.run.reevaluation import reevaluate
from tests.support.blobdamage import overwrite_program

RUN = (
    "--benchmark",
    "cartpole",
    "--agent",
    "reference",
    "--budget",
    "16",
    "--validation-episodes",
    "4",
    "--assessment-episodes",
    "8",
    "--max-candidates",
    "3",
    "--jobs",
    "1",
    "--seed",
    "3",
)


def invoke(*args: str) -> Result:
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    return CliRunner(**options).invoke(main, list(args))


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same Run (seeds and all) without and with the option, in one store."""
    root = tmp_path_factory.mktemp("assess") / "store"
    found: dict[str, Any] = {"store": root}
    for name, extra in (("plain", ()), ("assessed", ("--assess-candidates",))):
        result = invoke("run", *RUN, *extra, "--store", str(root), "--json")
        assert result.exit_code == 0, result.output
        outcome = json.loads(result.stdout)
        with open_store(root) as store:
            _, events = load_run(store, outcome["run_id"])
        found[name] = (outcome, events)
    return found


def test_every_other_candidate_is_assessed_on_the_same_episodes(runs: dict[str, Any]) -> None:
    outcome, events = runs["assessed"]
    validated = [e.submission_id for e in of(events, CandidateValidated)]
    (selected,) = of(events, FinalSubmissionSelected)
    (completed,) = of(events, AssessmentCompleted)
    assessed = of(events, CandidateAssessed)
    assert len(validated) >= 2, "the reference Agent named several candidates"
    # Each other validated candidate once, in Validation order, after the selected one's.
    assert [a.submission_id for a in assessed] == [
        c for c in validated if c != selected.submission_id
    ]
    assert events.index(assessed[0]) > events.index(completed)
    indices = [e.index for e in completed.episodes]
    assert len(indices) == 8
    for a in assessed:
        assert a.error is None and a.score is not None
        assert [e.index for e in a.episodes] == indices  # the same Episodes, the same count
    # The selection and the Run's assessment score stay the selected one's.
    (finished,) = of(events, RunFinished)
    assert completed.submission_id == selected.submission_id == finished.final_submission_id
    assert finished.assessment_score == completed.score == outcome["assessment_score"]
    created = of(events, RunCreated)[0]
    assert created.config["assessment"]["candidates"] is True


def test_without_the_option_nothing_changes(runs: dict[str, Any]) -> None:
    (plain, plain_events), (assessed, assessed_events) = runs["plain"], runs["assessed"]
    assert of(plain_events, CandidateAssessed) == []
    assert of(plain_events, RunCreated)[0].config["assessment"]["candidates"] is False
    # Same seeds, same Agent: the same Run up to the candidates' Assessments.
    assert plain["final_submission_id"] == assessed["final_submission_id"]
    assert plain["assessment_score"] == assessed["assessment_score"]

    # (The transcript's chunks follow the Agent's timing, not the rules.)
    def kinds(events: list[Event]) -> list[str]:
        return [
            type(e).__name__ for e in events if not isinstance(e, CandidateAssessed | AgentMessages)
        ]

    assert kinds(plain_events) == kinds(assessed_events)


def test_a_config_recorded_before_the_option_folds_as_before(runs: dict[str, Any]) -> None:
    _, events = runs["plain"]
    created = events[0]
    assert isinstance(created, RunCreated)
    old = {
        **created.config,
        "assessment": {k: v for k, v in created.config["assessment"].items() if k != "candidates"},
    }
    state = fold([msgspec.structs.replace(created, config=old), *events[1:]])
    assert state.cfg.assessment == AssessmentConfig(
        enabled=True, episodes=8, split="assessment", candidates=False
    )
    assert state.finished == "finished"
    assert RunConfig.from_dict(old).assessment.candidates is False


def test_the_decider_refuses_an_impossible_candidate_assessment(runs: dict[str, Any]) -> None:
    _, events = runs["assessed"]
    assessed = of(events, CandidateAssessed)
    first = events.index(assessed[0])
    head, finished = events[:first], events[-1]
    assert fold(events).finished == "finished"  # as recorded: verified

    def refused(stream: list[Event]) -> str:
        with pytest.raises(InvalidTransition) as caught:
            fold(stream)
        return str(caught.value)

    selected = of(events, FinalSubmissionSelected)[0].submission_id
    if len(assessed) >= 2:  # out of Validation order
        assert "not next" in refused([*head, assessed[1], assessed[0]])
    assert "not next" in refused([*head, assessed[0], assessed[0]])  # twice
    assert "not next" in refused(
        [*head, msgspec.structs.replace(assessed[0], submission_id=selected)]
    )
    # Both a score and an error, or neither.
    assert "score or an error" in refused(
        [*head, msgspec.structs.replace(assessed[0], error="boom")]
    )
    assert "score or an error" in refused([*head, msgspec.structs.replace(assessed[0], score=None)])
    # Before the selected one's Assessment completed.
    before = events.index(of(events, AssessmentCompleted)[0])
    assert "not next" in refused([*events[:before], assessed[0]])
    # Concluding before every candidate was assessed.
    assert "still has work" in refused([*head, finished])
    # Not asked for: the plain Run never assesses a candidate.
    _, plain = runs["plain"]
    at = plain.index(of(plain, AssessmentCompleted)[0]) + 1
    assert "not next" in refused([*plain[:at], assessed[0]])


def test_replay_verifies_and_reevaluation_covers_every_candidate(runs: dict[str, Any]) -> None:
    outcome, events = runs["assessed"]
    root = str(runs["store"])
    result = invoke(
        "record", "replay", outcome["run_id"], "--store", root, "--reevaluate", "--json"
    )
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout)
    assert replayed["ok"] and replayed["problems"] == [] and replayed["mismatches"] == []
    totals: list[int] = []
    with open_store(runs["store"]) as store:
        assert (
            reevaluate(store, outcome["run_id"], progress=lambda done, total: totals.append(total))
            == []
        )
        assert verify_store(store).ok
    held_out = 8 * (
        1 + len(of(events, CandidateAssessed))
    )  # the selected one's and each candidate's
    validation = 4 * (
        1 + len(of(events, CandidateValidated))
    )  # the reference's and each candidate's
    assert totals[-1] == outcome["budget_used"] + validation + held_out


def test_the_read_api_read_models_and_frames_hold_each_candidates_score(
    runs: dict[str, Any],
) -> None:
    outcome, events = runs["assessed"]
    run_id = outcome["run_id"]
    scores = {a.submission_id: a.score for a in of(events, CandidateAssessed)}
    selected = outcome["final_submission_id"]
    scores[selected] = outcome["assessment_score"]
    validation = {v.submission_id: v.score for v in of(events, CandidateValidated)}
    with open_store(runs["store"]) as store:
        summary = summarize(store.events, "run-" + run_id)
        assert {
            i: s.assessment_score
            for i, s in summary.submissions.items()
            if s.assessment_score is not None
        } == scores
        assert all(summary.submissions[i].assessment_failed is False for i in scores)
        refresh(store)
        connection = open_read_models(store, read_only=True)
        try:
            rows = connection.execute(
                "SELECT submission_id, assessment_score FROM submissions "
                "WHERE run_id = ? AND assessment_score IS NOT NULL",
                [run_id],
            ).fetchall()
        finally:
            connection.close()
        assert dict(rows) == scores
        frame = submissions_df(store, run_ids=[run_id])
        plain = submissions_df(store, run_ids=[runs["plain"][0]["run_id"]])
        validity = diagnostics.selection_validity(runs_df(store), submissions_df(store))
    filled = frame[frame["assessment_score"].notna()]
    assert dict(zip(filled["submission_id"], filled["assessment_score"], strict=True)) == scores
    assert list(plain[plain["assessment_score"].notna()]["submission_id"]) == [selected]
    (row,) = validity["candidates"].to_dict("records")
    ids = sorted(scores)
    assert row["run_id"] == run_id and row["candidates"] == len(scores)
    expected = spearman([validation[i] for i in ids], [scores[i] for i in ids])
    assert row["spearman"] == expected or (row["spearman"] != row["spearman"] and expected is None)


def test_the_events_frame_leaves_candidate_assessments_out(runs: dict[str, Any]) -> None:
    from evopolicygym.analysis import events_df

    with open_store(runs["store"]) as store:
        frame = events_df(store, run_ids=[runs["assessed"][0]["run_id"]])
    assert "CandidateAssessed" not in set(frame["type"])
    assert "AssessmentCompleted" in set(frame["type"])


def test_the_events_export_leaves_candidate_assessments_out(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    from evopolicygym_exporters.base import ExportOptions
    from evopolicygym_exporters.events import EventsExporter
    from evopolicygym_exporters.history import read_history

    with open_store(runs["store"]) as store:
        exporter = EventsExporter(store, ExportOptions())
        history = read_history(store, "run-" + runs["assessed"][0]["run_id"])
        assert history is not None
        types = {row["type"] for _, row in exporter.rows(history)}
    assert "AssessmentCompleted" in types and "CandidateAssessed" not in types


def test_the_run_report_shows_each_candidates_assessment(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    outcome, events = runs["assessed"]
    page = tmp_path / "run.html"
    result = invoke("report", outcome["run_id"], "--store", str(runs["store"]), "-o", str(page))
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "Every validated candidate on the same held-out Episodes" in html
    for a in of(events, CandidateAssessed):
        assert f"candidate #{a.submission_id} assessed: score {a.score:.6g}" in html


# --------------------------------------------------------------------------- experiments


def test_an_experiment_spec_asks_for_it_and_the_summary_reports_the_correlation(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "validity"\nprofile = "quick"\nseeds = 1\n\n'
        "[run]\nepisode_budget = 16\njobs = 1\n\n"
        "[run.validation]\nepisodes_per_candidate = 4\nmax_candidates = 3\n\n"
        "[run.assessment]\nepisodes = 8\ncandidates = true\n\n"
        '[[agents]]\nname = "reference"\nprovider = "reference"\n\n'
        '[[benchmarks]]\nid = "cartpole"\n'
    )
    root = str(tmp_path / "store")
    ran = invoke("experiment", "run", str(spec), "--store", root)
    assert ran.exit_code == 0, ran.output
    result = invoke("experiment", "summary", "validity", "--store", root, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    with open_store(root) as store:
        frame = submissions_df(store, experiment="validity")
        (run_id,) = set(frame["run_id"])
        _, events = load_run(store, run_id)
    assert of(events, RunCreated)[0].config["assessment"]["candidates"] is True
    assessed = frame[frame["candidate"].astype(bool) & frame["assessment_score"].notna()]
    assert len(assessed) == 1 + len(of(events, CandidateAssessed)) >= 2
    (row,) = found["selection_validity"]["candidates"]
    assert (row["run_id"], row["candidates"]) == (run_id, len(assessed))
    assert row["spearman"] == spearman(assessed["validation_score"], assessed["assessment_score"])
    text = invoke("experiment", "summary", "validity", "--store", root)
    assert "Candidates assessed in 1 Runs" in text.stdout


# --------------------------------------------------------------------------- faults


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evopolicygym.cli", *args]


def _kill_after(store_dir: Path, kind: type[Event], count: int) -> str:
    """Start a Run with the option, SIGKILL its Host once ``count`` events of ``kind`` are
    recorded (each candidate's Assessment takes long enough to land inside it); its id."""
    command = _cli(
        "run",
        *RUN[:-4],
        "--seed",
        "3",
        "--assessment-episodes",
        "400",
        "--assess-candidates",
        "--store",
        str(store_dir),
    )
    host = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while host.poll() is None and time.monotonic() < deadline:
            if (store_dir / "events.db").exists():
                with open_store(store_dir) as store:
                    ids = [i.stream_id[len("run-") :] for i in store.events.streams("run-")]
                    if ids:
                        _, events = load_run(store, ids[0])
                        if len(of(events, kind)) >= count:
                            host.send_signal(signal.SIGKILL)
                            break
            time.sleep(0.02)
        host.wait()
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    with open_store(store_dir) as store:
        (run_id,) = [i.stream_id[len("run-") :] for i in store.events.streams("run-")]
        deadline = time.monotonic() + 10
        while host_alive(store, run_id) and time.monotonic() < deadline:
            time.sleep(0.05)
    return run_id


def _resume(store_dir: Path, run_id: str, *, intact: bool = True) -> list[Event]:
    done = subprocess.run(
        _cli("resume", run_id, "--store", str(store_dir)),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    with open_store(store_dir) as store:
        assert verify_store(store).ok is intact
        state, events = load_run(store, run_id)
    assert state.finished == "finished"
    return events


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_host_killed_mid_way_resumes_without_assessing_a_candidate_twice(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    run_id = _kill_after(store_dir, CandidateAssessed, 1)
    with open_store(store_dir) as store:
        state, before = load_run(store, run_id)
    assert state.finished is None, "killed before the Run finished"
    (first,) = of(before, CandidateAssessed)  # killed during the second candidate's
    events = _resume(store_dir, run_id)
    assert of(events, RunResumed)
    validated = [e.submission_id for e in of(events, CandidateValidated)]
    selected = of(events, FinalSubmissionSelected)[0].submission_id
    assessed = of(events, CandidateAssessed)
    assert [a.submission_id for a in assessed] == [c for c in validated if c != selected]
    assert assessed[0] == first  # kept, not done again
    (started,) = of(events, AssessmentStarted)
    assert len(of(events, AssessmentCompleted)) == 1
    assert all(len(a.episodes) == started.episodes for a in assessed)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_candidate_whose_assessment_fails_does_not_fail_the_run(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    run_id = _kill_after(store_dir, AssessmentStarted, 1)
    with open_store(store_dir) as store:
        state, before = load_run(store, run_id)
        assert state.finished is None and not of(before, CandidateAssessed)
        selected = of(before, FinalSubmissionSelected)[0]
        validated = [e.submission_id for e in of(before, CandidateValidated)]
        others = [c for c in validated if c != selected.submission_id]
        # The last candidate's Program can no longer be read: its tree reference is corrupt.
        victim = state.submission(others[-1])
        assert victim is not None and victim.program_digest != selected.program_digest
        overwrite_program(store.blobs, victim.program_digest, b"not a digest\n")
    events = _resume(store_dir, run_id, intact=False)  # `record verify` names the corrupt blob
    assessed = {a.submission_id: a for a in of(events, CandidateAssessed)}
    assert list(assessed) == others
    failed = assessed[others[-1]]
    assert failed.score is None and failed.error is not None and "is not a digest" in failed.error
    (finished,) = of(events, RunFinished)
    assert finished.reason == "finished"
    assert finished.assessment_score == of(events, AssessmentCompleted)[0].score
    with open_store(store_dir) as store:
        summary = summarize(store.events, "run-" + run_id)
    assert summary.submissions[others[-1]].assessment_failed is True
    assert summary.submissions[others[-1]].assessment_score is None

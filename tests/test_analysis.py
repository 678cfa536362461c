"""The analysis dataframes: documented columns and dtypes, values as the Run read API and
the exports tell them, and nothing Host-private.

Synthetic recorded Runs (tests/support/runlogs.py, every private value carrying a canary) pin
the lineage columns against the ``programs`` export and prove no private value gets
into a frame; real Runs of the reference agent (CartPole, Acrobot's negative rewards)
and of an Agent that fails check what the Host records reads whole.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import pytest

from evopolicygym.analysis import (
    EPISODES_COLUMNS,
    EVENTS_COLUMNS,
    MESSAGES_COLUMNS,
    RUNS_COLUMNS,
    SUBMISSIONS_COLUMNS,
    dataframes,
    episodes_df,
    events_df,
    messages_df,
    runs_df,
    submissions_df,
)
from evopolicygym.records.events import AgentMessages, EpisodeCompleted
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import UnknownRun, summarize
from tests.support.runlogs import (
    CANARY,
    CANARY_SEEDS,
    synth_run,
    write_experiment,
    write_run,
)

pytestmark = pytest.mark.timeout(300)

FRAMES = {
    "runs_df": (runs_df, RUNS_COLUMNS),
    "submissions_df": (submissions_df, SUBMISSIONS_COLUMNS),
    "episodes_df": (episodes_df, EPISODES_COLUMNS),
    "messages_df": (messages_df, MESSAGES_COLUMNS),
    "events_df": (events_df, EVENTS_COLUMNS),
}
_DTYPES = {"utc": "datetime64[ns, UTC]"}


@pytest.fixture
def synth(tmp_path: Path) -> Any:
    with open_store(tmp_path / "store", create=True) as store:
        write_run(store, synth_run("alpha"))
        write_run(store, synth_run("beta", direction="minimize", reason="agent_exited"))
        yield store


# --------------------------------------------------------------------------- the documentation


def _documented(frame: str) -> dict[str, str]:
    """The (column, dtype) rows of ``frame``'s table in the module docstring."""
    doc = dataframes.__doc__ or ""
    start = doc.index(f"``{frame}``")
    table = doc[start:].split("\n\n")[1]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| ")]
    return {name.strip(): kind.strip() for name, kind in rows[2:]}


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_every_frame_has_exactly_its_documented_columns_and_dtypes(synth: Store, name: str) -> None:
    build, columns = FRAMES[name]
    documented = _documented(name)
    assert list(documented) == list(columns)
    for frame in (build(synth), build(synth, run_ids=[])):  # rows, and none
        assert list(frame.columns) == list(columns)
        found = {c: str(t) for c, t in frame.dtypes.items()}
        expected = {c: _DTYPES.get(k, k) for c, k in columns.items()}
        assert found == expected
        assert expected == documented


# --------------------------------------------------------------------------- values


def test_submissions_carry_the_programs_exports_lineage(
    synth: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evopolicygym_exporters import ExportOptions, export

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    export(synth, ["programs"], tmp_path / "out", ExportOptions())
    loaded = datasets.load_dataset(str(tmp_path / "out"), "programs")
    exported = {(r["run_id"], r["submission_id"]): r for split in loaded for r in loaded[split]}
    subs = submissions_df(synth)
    assert len(subs) == len(exported) == 12
    for row in subs.to_dict("records"):
        want = exported[(row["run_id"], row["submission_id"])]
        assert row["edit_kind"] == want["edit_kind"]
        assert row["parent_submission_id"] == (want["parent_submission_id"] or 0)
        assert row["parent_distance"] == want["parent_distance"]
        assert row["parent_basis"] == want["parent_basis"]
        assert _none(row["beats_parent"]) == want["matched_better"]
        assert _none(row["best_so_far_basis"]) == want["best_so_far_basis"]
        assert _none(row["best_so_far_matched"]) == want["best_so_far_matched"]
        assert row["best_so_far"] == want["best_so_far"]
        assert row["episodes_used"] == want["budget_spent"]
        assert row["cumulative_episodes"] == want["budget_used"]
        assert row["selected"] == want["selected"]
    alpha = subs[subs.run_id == "alpha"].set_index("submission_id")
    # By hand: 2 beats 1 on the same indices; 5 (named from 1, a new helper) loses to it.
    assert alpha.loc[2, "beats_parent"] and alpha.loc[2, "edit_kind"] == "parametric"
    assert alpha.loc[5, "parent_basis"] == "stated" and alpha.loc[5, "edit_kind"] == "synthesis"
    assert not alpha.loc[5, "beats_parent"]
    assert alpha.loc[6, "edit_kind"] == "cosmetic" and alpha.loc[6, "parent_submission_id"] == 5
    assert list(alpha.best_so_far_score) == [2.0, 5.0, 9.0, 9.0, 9.0, 9.0]
    assert alpha.loc[4, "failed"] and pd.isna(alpha.loc[4, "score"])
    assert list(alpha.candidate) == [False, True, True, False, False, False]
    beta = subs[subs.run_id == "beta"].set_index("submission_id")
    # Minimize: 2 (5.0) does not beat 1 (2.0); the best so far stays the lowest.
    assert not beta.loc[2, "beats_parent"] and list(beta.best_so_far_score) == [
        2.0,
        2.0,
        2.0,
        2.0,
        0.0,
        0.0,
    ]


def _none(value: Any) -> Any:
    return None if value is pd.NA or (isinstance(value, float) and pd.isna(value)) else value


def test_no_private_value_reaches_any_frame(synth: Store) -> None:
    secrets = [CANARY, *map(str, CANARY_SEEDS.values())]
    for name, (build, _) in FRAMES.items():
        text = build(synth).to_json(date_format="iso")
        for secret in secrets:
            assert secret not in text, (name, secret)
    events = events_df(synth)
    # As the events export: an unselected candidate's Validation result is left out.
    validated = events[events.type == "CandidateValidated"]
    assert set(zip(validated.run_id, validated.submission_id, strict=True)) == {
        ("alpha", 2),
        ("beta", 2),
    }
    # The only seed columns are an experiment cell's repeat labels: empty without one.
    assert runs_df(synth)[["seed", "agent_seed"]].isna().all().all()


def test_runs_follow_the_run_read_api(synth: Store) -> None:
    runs = runs_df(synth).set_index("run_id")
    for run_id in ("alpha", "beta"):
        summary = summarize(synth.events, f"run-{run_id}")
        row = runs.loc[run_id]
        assert row["status"] == summary.status and row["handoff"] == summary.handoff
        assert row["best_score"] == summary.best_score and row["budget_used"] == summary.budget_used
        assert row["submissions"] == summary.started and row["published"] == summary.published
        assert row["assessment_score"] == summary.assessment_score
        assert row["agent"] == "reference" and row["benchmark"] == row["benchmark_id"]
    assert runs.loc["alpha", "success"] and not runs.loc["beta", "success"]
    assert (
        runs.loc["beta", "score_direction"] == "minimize" and runs.loc["beta", "best_score"] == 0.0
    )
    assert pd.isna(runs.loc["alpha", "experiment_id"]) and pd.isna(runs.loc["alpha", "current"])


def test_run_ids_select_and_an_unknown_run_is_named(
    synth: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert list(runs_df(synth, run_ids=["run-beta"]).run_id) == ["beta"]
    assert set(submissions_df(synth, run_ids=["alpha"]).run_id) == {"alpha"}
    with pytest.raises(UnknownRun, match="'gamma'"):
        episodes_df(synth, run_ids=["gamma"])
    # A path, or None for the default store (EVOPOLICY_STORE), as the CLI resolves it.
    assert list(runs_df(str(synth.path)).run_id) == ["alpha", "beta"]
    monkeypatch.setenv("EVOPOLICY_STORE", str(synth.path))
    assert list(runs_df().run_id) == ["alpha", "beta"]


# --------------------------------------------------------------------------- real Runs


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Real Runs: the reference agent on CartPole and on Acrobot (rewards of -1 a step),
    and an Agent that exits with an error at once (nothing handed off)."""
    from evopolicygym.agents.launcher import ProviderLauncher
    from evopolicygym.agents.providers import agent_identity
    from evopolicygym.run import RunHost, create_run
    from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig

    root = tmp_path_factory.mktemp("analysis-real") / "store"
    config = RunConfig(
        episode_budget=8,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
        assessment=AssessmentConfig(episodes=2),
    )
    with open_store(root, create=True) as store:
        for run_id, benchmark, agent in (
            ("cart", "cartpole", agent_identity("reference")),
            ("acro", "acrobot", agent_identity("reference")),
            ("fails", "cartpole", agent_identity("command", command="false")),
        ):
            create_run(store, benchmark, config, agent, run_id=run_id)
            RunHost(store, run_id, launcher=ProviderLauncher(allow_uncontained=True)).drive()
        yield store


def test_real_runs_read_whole(real: Store) -> None:
    runs = runs_df(real).set_index("run_id")
    assert list(runs.index) == ["acro", "cart", "fails"]
    for run_id in ("cart", "acro"):
        row = runs.loc[run_id]
        assert row["status"] == "finished" and row["handoff"] == "agent"
        assert row["submissions"] >= 1 and row["budget_used"] <= row["budget_total"] == 8
        assert not pd.isna(row["assessment_score"]) and row["assessment_episodes"] == 2
    # Acrobot scores are negative (-1 a step until the goal): maximize, best the highest.
    acro = runs.loc["acro"]
    assert (
        acro["score_direction"] == "maximize"
        and acro["best_score"] < 0
        and acro["assessment_score"] < 0
    )
    fails = runs.loc["fails"]
    assert fails["status"] == "agent_failed" and fails["handoff"] == "none" and not fails["success"]
    assert (
        fails["submissions"] == 0
        and pd.isna(fails["assessment_score"])
        and pd.isna(fails["improved"])
    )

    subs = submissions_df(real)
    episodes = episodes_df(real)
    for run_id in ("cart", "acro"):
        recorded = [
            e.event()
            for e in real.events.read_stream(f"run-{run_id}", 0)
            if e.type == "EpisodeCompleted"
        ]
        mine = episodes[episodes.run_id == run_id]
        assert len(mine) == len(recorded) == runs.loc[run_id, "episodes"]
        assert list(mine.total_reward) == [
            e.total_reward for e in recorded if isinstance(e, EpisodeCompleted)
        ]
        own = subs[subs.run_id == run_id]
        assert own.episodes_used.sum() == runs.loc[run_id, "budget_used"]
        assert (
            own.selected.sum() == 1
            and own[own.selected].submission_id.item() == runs.loc[run_id, "final_submission_id"]
        )
        for sub in own[own.published].itertuples():
            # A published score is the mean of its Episodes' scores.
            found = mine[mine.submission_id == sub.submission_id].score
            assert found.mean() == pytest.approx(sub.score)
    assert (episodes[episodes.run_id == "acro"].total_reward < 0).all()
    assert set(subs.edit_kind.dropna()) <= {"none", "cosmetic", "parametric", "synthesis"}

    messages = messages_df(real)
    for run_id in ("cart", "acro"):
        recorded = [
            m
            for e in real.events.read_stream(f"run-{run_id}", 0)
            if e.type == "AgentMessages"
            for m in e.event().messages  # type: ignore[attr-defined]
        ]
        mine = messages[messages.run_id == run_id]
        assert list(mine.content) == [m.content for m in recorded] and len(mine) > 0
        assert set(mine.role) <= {"system", "user", "assistant", "tool", "error"}
    assert AgentMessages.type_name() in set(events_df(real, run_ids=["cart"]).type)

    events = events_df(real, run_ids=["fails"])
    assert list(events.position) == sorted(events.position)
    assert events.type.iloc[0] == "RunCreated" and events.type.iloc[-1] == "RunFinished"
    assert events.reason.iloc[-1] == "agent_failed"


def test_frames_of_nothing_are_empty_with_their_columns(tmp_path: Path) -> None:
    with open_store(tmp_path / "empty", create=True) as store:
        for name, (build, columns) in FRAMES.items():
            frame = build(store)
            assert frame.empty and list(frame.columns) == list(columns), name


def test_a_column_table_names_each_dtype_once() -> None:
    for _, columns in FRAMES.values():
        assert all(
            re.fullmatch(r"string|Int64|float64|boolean|object|utc", k) for k in columns.values()
        )


# --------------------------------------------------------------------------- experiments


def test_an_experiment_adds_its_cells_and_limits_every_frame_to_its_runs(synth: Store) -> None:
    from evopolicygym.records.experiments import UnknownExperiment

    write_run(synth, synth_run("retried", reason="agent_failed", assessment_score=None))
    write_run(synth, synth_run("outside"))
    write_experiment(
        synth,
        [
            ("ref", "toy", 0, 0, [("alpha", "finished")]),
            ("ref", "toy", 1, 0, [("retried", "agent_failed"), ("beta", "agent_exited")]),
        ],
    )
    runs = runs_df(synth, experiment="demo")
    assert runs.run_id.tolist() == ["alpha", "retried", "beta"]
    assert runs.experiment_id.tolist() == ["demo"] * 3 and runs.agent.tolist() == ["ref"] * 3
    assert (
        runs.benchmark.tolist() == ["toy"] * 3 and runs.benchmark_id.tolist() == ["toy-counter"] * 3
    )
    assert runs.seed.tolist() == [0, 1, 1] and runs.attempt.tolist() == [1, 1, 2]
    assert runs.current.tolist() == [True, False, True]
    assert runs.cell_id.tolist()[1] == "ref/toy/seed=1/agent_seed=0"
    for build in (submissions_df, episodes_df, messages_df, events_df):
        assert set(build(synth, experiment="demo").run_id) == {"alpha", "retried", "beta"}, build
    assert runs_df(synth, experiment="demo", run_ids=["beta"]).run_id.tolist() == ["beta"]
    with pytest.raises(UnknownExperiment, match="nope"):
        runs_df(synth, experiment="nope")


def test_a_cli_session_record_replaces_the_live_stream_and_errors_follow(synth: Store) -> None:
    from evopolicygym.records.events import new_event
    from evopolicygym.transcript import AgentFault, Message, Usage

    stream = "run-alpha"
    version = synth.events.streams(stream)[0].version
    error = Message(
        role="error",
        content="API error: overloaded",
        error=AgentFault(kind="overloaded", status=529),
    )
    recorded = [
        Message(
            role="assistant",
            content="as the model said it",
            usage=Usage(input_tokens=7, output_tokens=3),
            model="m-1",
        ),
        Message(
            role="error",
            content="a synthetic message the CLI made up",
            error=AgentFault(kind="synthetic"),
        ),
    ]
    synth.events.append(
        stream,
        [
            new_event(AgentMessages(attempt=1, chunk=99, messages=[error]), f"{stream}/live-error"),
            new_event(
                AgentMessages(attempt=1, chunk=100, messages=recorded, source="codex-rollout"),
                f"{stream}/source",
            ),
        ],
        version,
    )
    messages = messages_df(synth, run_ids=["alpha"])
    assert messages.role.tolist() == ["system", "assistant", "error"]
    assert messages.content.tolist()[1:] == ["as the model said it", "API error: overloaded"]
    row = messages.iloc[1]
    assert (row["input_tokens"], row["output_tokens"], row["model"]) == (7, 3, "m-1")
    assert messages.iloc[2]["error_kind"] == "overloaded" and pd.isna(
        messages.iloc[0]["input_tokens"]
    )
    assert messages.turn.tolist() == [0, 1, 2] and (messages.attempt == 1).all()

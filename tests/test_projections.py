"""Projections and read models: a real SQLite store, real DuckDB, and ``evopolicy query``."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import inspect
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

from evopolicygym.cli import main
from evopolicygym.cli import query as query_module
from evopolicygym.records import events as event_module
from evopolicygym.records import new_event, open_store, read_models
from evopolicygym.records.events import (
    AgentMessages,
    AssessmentCompleted,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EpisodeOutcome,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    NewEvent,
    PoolEntry,
    RunCreated,
    RunFinished,
    SubmissionPublished,
    SubmissionRejected,
    ValidationStarted,
)
from evopolicygym.records.location import STORE_ENV, Store
from evopolicygym.records.projections import Batch, Projection, catch_up, checkpoints, insert_arrow
from evopolicygym.records.read_models import (
    EPISODES,
    EVENTS,
    PROJECTIONS,
    RUNS,
    SUBMISSIONS,
    ReadModelsBusy,
    open_read_models,
    refresh,
)
from evopolicygym.transcript import AgentIdentity, Message

READ_MODELS = ("events", "runs", "submissions", "episodes")

# Host-private values: distinctive, so that no count, score or index can equal one by chance.
POOL_SEEDS = [7_100_001 + i for i in range(6)]
POLICY_SEEDS = [7_200_001 + i for i in range(6)]
VALIDATION_SEED = 7_300_001
ASSESSMENT_SEED = 7_300_002
CONFIG_SEED = 7_300_003
SCENARIO_SECRET = "scenario-secret-7300004"
PRIVATE_INTS = {*POOL_SEEDS, *POLICY_SEEDS, VALIDATION_SEED, ASSESSMENT_SEED, CONFIG_SEED}
PRIVATE_TEXT = {str(v) for v in PRIVATE_INTS} | {SCENARIO_SECRET}


# --------------------------------------------------------------------------- synthetic Runs


def run_created(run_id: str, direction: str | None = "maximize") -> RunCreated:
    spec: dict[str, Any] = {"id": "toy", "max_episode_steps": 100}
    if direction is not None:
        spec["score_direction"] = direction
    return RunCreated(
        run_id=run_id,
        config={"budget": 8, "seed": CONFIG_SEED},
        benchmark_id="toy",
        benchmark_spec=spec,
        environment_digest="env-digest",
        initial_program_digest="prog-0",
        agent=AgentIdentity(name="reference", provider="reference", model="ref-1"),
        pool=[
            PoolEntry(
                index=i,
                split="train",
                seed=POOL_SEEDS[i],
                policy_seed=POLICY_SEEDS[i],
                scenario={"secret": SCENARIO_SECRET},
            )
            for i in range(6)
        ],
        seeds={"validation": VALIDATION_SEED, "assessment": ASSESSMENT_SEED},
    )


def episode(submission: int, index: int, reward: float, **kw: Any) -> EpisodeCompleted:
    return EpisodeCompleted(
        submission_id=submission,
        index=index,
        status=kw.pop("status", "ok"),
        total_reward=reward,
        steps=kw.pop("steps", 100),
        duration_s=kw.pop("duration_s", 0.25),
        **kw,
    )


def finished_run(run_id: str = "alpha") -> list[Event]:
    """A whole maximising Run: two published Submissions, a rejection, a failure, the end."""
    return [
        run_created(run_id),
        EvaluationStarted(
            submission_id=1,
            program_digest="prog-1",
            indices=[0, 1],
            budget_reserved=2,
            budget_used=2,
        ),
        episode(1, 0, 10.0),
        episode(1, 1, 0.0, status="error", steps=3, failure="ValueError: boom"),
        SubmissionPublished(
            submission_id=1,
            program_digest="prog-1",
            score=5.0,
            failures=1,
            budget_used=2,
            budget_left=6,
        ),
        SubmissionRejected(request_id="req-2", code="bad_selector", message="no such index 99"),
        EvaluationStarted(
            submission_id=2,
            program_digest="prog-2",
            parent_program_digest="prog-1",
            indices=[2, 3],
            budget_reserved=2,
            budget_used=4,
        ),
        episode(2, 2, 20.0),
        episode(2, 3, 22.0, trace_blob="blob-trace-2-3"),
        SubmissionPublished(
            submission_id=2,
            program_digest="prog-2",
            score=21.0,
            failures=0,
            budget_used=4,
            budget_left=4,
        ),
        EvaluationStarted(
            submission_id=3, program_digest="prog-3", indices=[4], budget_reserved=1, budget_used=5
        ),
        EvaluationFailed(submission_id=3, error="runner crashed", budget_consumed=1),
        FinishAccepted(request_id="req-9", candidates=[1, 2]),
        ValidationStarted(candidates=[1, 2], split="validation", episodes=4, seed=VALIDATION_SEED),
        CandidateValidated(
            submission_id=1,
            score=4.0,
            failures=0,
            episodes=[EpisodeOutcome(index=0, status="ok", total_reward=4.0, steps=50)],
        ),
        CandidateValidated(submission_id=2, score=19.5, failures=0),
        FinalSubmissionSelected(
            submission_id=2, program_digest="prog-2", score=19.5, reason="best"
        ),
        AssessmentStarted(submission_id=2, split="test", episodes=4, seed=ASSESSMENT_SEED),
        AssessmentCompleted(submission_id=2, score=18.0, failures=0),
        RunFinished(
            reason="finished", final_submission_id=2, validation_score=19.5, assessment_score=18.0
        ),
    ]


def open_run(run_id: str = "beta") -> list[Event]:
    """A minimising Run, still going: the lower score is the better one."""
    return [
        run_created(run_id, "minimize"),
        EvaluationStarted(
            submission_id=1, program_digest="b-1", indices=[5], budget_reserved=1, budget_used=1
        ),
        episode(1, 5, 3.0),
        SubmissionPublished(
            submission_id=1,
            program_digest="b-1",
            score=3.0,
            failures=0,
            budget_used=1,
            budget_left=7,
        ),
        EvaluationStarted(
            submission_id=2, program_digest="b-2", indices=[5], budget_reserved=1, budget_used=2
        ),
        episode(2, 5, 1.0),
        SubmissionPublished(
            submission_id=2,
            program_digest="b-2",
            score=1.0,
            failures=0,
            budget_used=2,
            budget_left=6,
        ),
    ]


def append(store: Store, stream: str, events: Sequence[Event | NewEvent]) -> list[int]:
    version = next((s.version for s in store.events.streams(stream) if s.stream_id == stream), 0)
    batch = [
        e if isinstance(e, NewEvent) else new_event(e, f"{stream}-{version + k + 1}")
        for k, e in enumerate(events)
    ]
    return store.events.append(stream, batch, version)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


@pytest.fixture
def two_runs(store: Store) -> Store:
    append(store, "run-alpha", finished_run("alpha"))
    append(store, "run-beta", open_run("beta"))
    return store


def snapshot(connection: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: connection.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        for table in READ_MODELS
    }


def records(connection: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    result = connection.execute(sql)
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def fresh_build(store: Store, tmp_path: Path, name: str, batch: int = 10_000) -> dict[str, Any]:
    connection = duckdb.connect(str(tmp_path / f"{name}.duckdb"))
    try:
        catch_up(store, connection, PROJECTIONS, batch)
        return snapshot(connection)
    finally:
        connection.close()


# --------------------------------------------------------------------------- catch-up


def test_catch_up_fills_every_read_model(two_runs: Store) -> None:
    head = two_runs.events.head()
    assert refresh(two_runs) == head == 27
    with open_read_models(two_runs, read_only=True) as db:
        events = records(db, "SELECT * FROM events ORDER BY position")
        assert [e["position"] for e in events] == list(range(1, head + 1))
        first = events[0]
        assert first["stream_id"] == "run-alpha" and first["run_id"] == "alpha"
        assert (first["type"], first["schema_version"], first["stream_version"]) == (
            "RunCreated",
            RunCreated.SCHEMA_VERSION,
            1,
        )
        assert first["event_id"] == "run-alpha-1"
        stored = two_runs.events.read_all(0, 1)[0]
        recorded = first["recorded_at"].replace(tzinfo=dt.UTC).timestamp()
        assert recorded == pytest.approx(stored.recorded_at / 1e9, abs=1e-5)
        assert json.loads(first["payload"]) == json.loads(stored.payload)
        assert db.execute(
            "SELECT payload->>'$.agent.name' FROM events WHERE position = 1"
        ).fetchone() == ("reference",)
        assert db.execute("SELECT typeof(payload) FROM events LIMIT 1").fetchone() == ("JSON",)

        runs = {r["run_id"]: r for r in records(db, "SELECT * FROM runs")}
        assert set(runs) == {"alpha", "beta"}
        alpha, beta = runs["alpha"], runs["beta"]
        assert alpha["benchmark_id"] == "toy"
        assert (alpha["agent_name"], alpha["agent_provider"], alpha["agent_model"]) == (
            "reference",
            "reference",
            "ref-1",
        )
        assert alpha["status"] == "finished" and alpha["finished_at"] is not None
        assert (alpha["submissions"], alpha["published"], alpha["failed"], alpha["rejected"]) == (
            3,
            2,
            1,
            1,
        )
        assert (alpha["best_score"], alpha["best_submission_id"]) == (21.0, 2)
        assert (
            alpha["final_submission_id"],
            alpha["validation_score"],
            alpha["assessment_score"],
        ) == (
            2,
            19.5,
            18.0,
        )
        assert alpha["budget_used"] == 5 and alpha["created_at"] <= alpha["finished_at"]
        assert beta["score_direction"] == "minimize"
        assert (beta["best_score"], beta["best_submission_id"]) == (1.0, 2)
        assert beta["status"] == "running" and beta["finished_at"] is None
        assert beta["final_submission_id"] is None

        subs = {
            (s["run_id"], s["submission_id"]): s for s in records(db, "SELECT * FROM submissions")
        }
        assert set(subs) == {("alpha", 1), ("alpha", 2), ("alpha", 3), ("beta", 1), ("beta", 2)}
        one, two, three = subs["alpha", 1], subs["alpha", 2], subs["alpha", 3]
        assert one["indices"] == [0, 1] and one["budget_reserved"] == 2
        assert (one["status"], one["score"], one["failures"], one["error"]) == (
            "published",
            5.0,
            1,
            None,
        )
        assert one["program_digest"] == "prog-1" and one["published_at"] >= one["started_at"]
        assert (one["validation_score"], one["assessment_score"]) == (4.0, None)
        assert two["parent_program_digest"] == "prog-1"
        assert (two["score"], two["validation_score"], two["assessment_score"]) == (
            21.0,
            19.5,
            18.0,
        )
        assert (three["status"], three["error"], three["score"]) == (
            "failed",
            "runner crashed",
            None,
        )
        assert three["published_at"] is None and three["budget_consumed"] == 1

        episodes = records(db, "SELECT * FROM episodes ORDER BY position")
        assert [(e["run_id"], e["submission_id"], e["pool_index"]) for e in episodes] == [
            ("alpha", 1, 0),
            ("alpha", 1, 1),
            ("alpha", 2, 2),
            ("alpha", 2, 3),
            ("beta", 1, 5),
            ("beta", 2, 5),
        ]
        failed = episodes[1]
        assert (failed["status"], failed["total_reward"], failed["steps"]) == ("error", 0.0, 3)
        assert failed["failure"] == "ValueError: boom" and failed["duration_s"] == 0.25
        assert episodes[3]["trace_blob"] == "blob-trace-2-3"
        assert episodes[0]["recorded_at"] is not None

        marks = checkpoints(db)
        assert marks == {p.name: (p.version, head, 0) for p in PROJECTIONS}


def test_score_direction_defaults_to_maximize(store: Store) -> None:
    append(store, "run-gamma", [run_created("gamma", direction=None), *open_run("gamma")[1:]])
    refresh(store)
    with open_read_models(store, read_only=True) as db:
        row = db.execute("SELECT score_direction, best_score FROM runs").fetchone()
    assert row == ("maximize", 3.0)


def test_incremental_catch_up_applies_only_new_events(two_runs: Store, tmp_path: Path) -> None:
    first = refresh(two_runs)
    append(
        two_runs,
        "run-beta",
        [
            EvaluationStarted(
                submission_id=3,
                program_digest="b-3",
                indices=[0, 1],
                budget_reserved=2,
                budget_used=4,
            ),
            episode(3, 0, 0.5),
            episode(3, 1, 0.25),
            SubmissionPublished(
                submission_id=3,
                program_digest="b-3",
                score=0.5,
                failures=0,
                budget_used=4,
                budget_left=4,
            ),
            RunFinished(reason="budget_exhausted"),
        ],
    )
    append(two_runs, "run-delta", open_run("delta")[:2])
    head = two_runs.events.head()
    assert head == first + 7
    assert refresh(two_runs) == head
    assert refresh(two_runs) == head  # nothing new: nothing applied, nothing duplicated
    with open_read_models(two_runs, read_only=True) as db:
        assert {v[1] for v in checkpoints(db).values()} == {head}
        assert db.execute("SELECT count(*), count(DISTINCT position) FROM events").fetchone() == (
            head,
            head,
        )
        assert db.execute(
            "SELECT count(*) FROM (SELECT run_id, submission_id FROM submissions GROUP BY ALL "
            "HAVING count(*) > 1)"
        ).fetchone() == (0,)
        assert db.execute("SELECT count(*), count(DISTINCT position) FROM episodes").fetchone() == (
            8,
            8,
        )
        beta = records(db, "SELECT * FROM runs WHERE run_id = 'beta'")[0]
        assert (beta["status"], beta["best_score"], beta["best_submission_id"]) == (
            "budget_exhausted",
            0.5,
            3,
        )
        assert (beta["submissions"], beta["published"], beta["budget_used"]) == (3, 3, 4)
        delta = records(db, "SELECT * FROM runs WHERE run_id = 'delta'")[0]
        assert (delta["status"], delta["submissions"], delta["best_score"]) == ("running", 1, None)
        assert db.execute("SELECT status FROM submissions WHERE run_id = 'delta'").fetchone() == (
            "evaluating",
        )
        incremental = snapshot(db)
    assert incremental == fresh_build(two_runs, tmp_path, "whole")


@pytest.mark.parametrize("batch", [1, 2, 3, 5, 7])
def test_any_batch_size_gives_the_same_read_models(
    two_runs: Store, tmp_path: Path, batch: int
) -> None:
    """Submissions and Runs straddle batches: rows carried over must fold the same way."""
    assert fresh_build(two_runs, tmp_path, f"b{batch}", batch) == fresh_build(
        two_runs, tmp_path, "whole"
    )


def test_rows_forgotten_mid_catch_up_are_read_back(
    two_runs: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its memory bound a catch-up stops trusting what it remembers and reads rows back."""
    monkeypatch.setattr(read_models, "_REMEMBER", 1)
    assert fresh_build(two_runs, tmp_path, "forgetful", 2) == fresh_build(
        two_runs, tmp_path, "whole"
    )


def test_catch_up_in_several_sittings_matches_one(two_runs: Store, tmp_path: Path) -> None:
    """Each sitting starts from the checkpoint and reads back rows it wrote before."""
    path = tmp_path / "sittings.duckdb"
    stream = finished_run("eps") + open_run("zeta")
    for k in range(0, len(stream), 4):
        append(two_runs, "run-eps" if k < 20 else "run-zeta", stream[k : k + 4])
        with duckdb.connect(str(path)) as db:
            catch_up(two_runs, db, PROJECTIONS, batch=3)
    with duckdb.connect(str(path)) as db:
        assert snapshot(db) == fresh_build(two_runs, tmp_path, "once")


def test_projections_at_different_checkpoints_share_pages(store: Store, tmp_path: Path) -> None:
    """A page that starts before one projection's checkpoint is cut for it, not re-applied."""
    append(store, "run-alpha", finished_run("alpha"))
    with duckdb.connect(str(tmp_path / "mixed.duckdb")) as db:
        assert catch_up(store, db, [EVENTS, EPISODES], batch=6) == 20
        append(store, "run-beta", open_run("beta"))
        # runs and submissions start at 0; events and episodes at 20, inside the page 17..24.
        assert catch_up(store, db, PROJECTIONS, batch=8) == 27
        assert {v[1] for v in checkpoints(db).values()} == {27}
        assert snapshot(db) == fresh_build(store, tmp_path, "whole")


def big_messages(count: int, size: int) -> list[Event]:
    return [
        AgentMessages(attempt=1, chunk=k, messages=[Message(role="tool", content="x" * size)])
        for k in range(count)
    ]


def test_pages_are_bounded_in_bytes(store: Store, tmp_path: Path) -> None:
    """Large payloads make smaller pages and smaller reads; the result is the same."""
    append(store, "run-alpha", finished_run("alpha"))
    append(store, "run-big", big_messages(150, 1000))
    append(store, "run-beta", open_run("beta"))
    head = store.events.head()
    sizes: list[int] = []

    def create(connection: duckdb.DuckDBPyConnection) -> None:
        pass

    def apply(connection: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        sizes.append(sum(len(p) for p in batch.payloads) if len(batch) > 1 else 0)

    limits: list[int] = []

    class Counting:
        def read_all_rows(self, from_position: int = 0, limit: int = 1000) -> list[Any]:
            limits.append(limit)
            return store.events.read_all_rows(from_position, limit)

    pages = Projection("pages", 1, (), create, apply)
    with duckdb.connect(str(tmp_path / "paged.duckdb")) as db:
        assert catch_up(Counting(), db, [pages, *PROJECTIONS], max_bytes=3000) == head
        paged = snapshot(db)
    assert sizes and max(sizes) <= 3000  # a page of several events holds at most 3000 bytes
    assert len(sizes) >= 50  # 150 KB of messages: at least fifty pages
    assert limits[0] <= 100 and min(limits) < 10  # reads shrink once big payloads are seen
    assert paged == fresh_build(store, tmp_path, "whole")
    with pytest.raises(ValueError, match="max_bytes"):
        catch_up(store, duckdb.connect(), PROJECTIONS, max_bytes=0)


def test_refresh_caps_duckdb_memory(two_runs: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    original = read_models.catch_up

    def spy(store: Any, connection: duckdb.DuckDBPyConnection, *args: Any, **kw: Any) -> int:
        row = connection.execute("SELECT current_setting('memory_limit')").fetchone()
        assert row is not None
        seen.append(row[0])
        return original(store, connection, *args, **kw)

    monkeypatch.setattr(read_models, "catch_up", spy)
    assert refresh(two_runs) == 27
    with duckdb.connect() as db:
        db.execute(f"SET memory_limit = '{read_models.MEMORY_LIMIT}'")
        row = db.execute("SELECT current_setting('memory_limit')").fetchone()
    assert row is not None and seen == [row[0]]


# --------------------------------------------------------------------------- versions and atomicity


def test_version_bump_rebuilds_from_zero(two_runs: Store, tmp_path: Path) -> None:
    path = tmp_path / "rm.duckdb"
    with duckdb.connect(str(path)) as db:
        catch_up(two_runs, db, PROJECTIONS)
        before = snapshot(db)
        # Damage the runs table: only a rebuild from position 0 can undo it.
        db.execute("UPDATE runs SET status = 'damaged', best_score = -1")
        db.execute("UPDATE episodes SET status = 'untouched'")
        bumped = dataclasses.replace(RUNS, version=RUNS.version + 1)
        assert catch_up(two_runs, db, [EVENTS, bumped, SUBMISSIONS, EPISODES]) == 27
        after = snapshot(db)
        marks = checkpoints(db)
    assert after["runs"] == before["runs"]
    assert after["events"] == before["events"] and after["submissions"] == before["submissions"]
    assert {row[4] for row in after["episodes"]} == {"untouched"}  # not rebuilt: same version
    assert marks["runs"] == (RUNS.version + 1, 27, 0)
    assert marks["episodes"] == (EPISODES.version, 27, 0)


def test_missing_table_rebuilds_that_projection(two_runs: Store, tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "rm.duckdb")) as db:
        catch_up(two_runs, db, PROJECTIONS)
        before = snapshot(db)
        db.execute("DROP TABLE submissions")
        catch_up(two_runs, db, PROJECTIONS)
        assert snapshot(db) == before


def test_a_failed_batch_keeps_neither_rows_nor_checkpoint(two_runs: Store, tmp_path: Path) -> None:
    calls = 0

    def flaky(connection: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        nonlocal calls
        calls += 1
        EPISODES.apply(connection, batch)  # its rows are written, then the batch fails
        if calls == 2:
            raise RuntimeError("disk on fire")

    # The failing projection comes last, after the others wrote this batch's rows.
    failing = [EVENTS, RUNS, SUBMISSIONS, dataclasses.replace(EPISODES, apply=flaky)]
    path = tmp_path / "rm.duckdb"
    with duckdb.connect(str(path)) as db:
        with pytest.raises(RuntimeError, match="disk on fire"):
            catch_up(two_runs, db, failing, batch=5)
        assert {v[1] for v in checkpoints(db).values()} == {5}
        assert db.execute("SELECT max(position), count(*) FROM events").fetchone() == (5, 5)
        assert db.execute("SELECT max(position) FROM episodes").fetchone() == (4,)
        alpha = records(db, "SELECT * FROM runs")[0]
        assert (alpha["submissions"], alpha["published"], alpha["rejected"]) == (1, 1, 0)
        assert db.execute("SELECT count(*) FROM submissions").fetchone() == (1,)
        # The next catch-up starts from the last good checkpoint and recovers fully.
        assert catch_up(two_runs, db, PROJECTIONS, batch=5) == 27
        assert snapshot(db) == fresh_build(two_runs, tmp_path, "whole")


def test_checkpoint_times_are_utc(two_runs: Store, tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "tz.duckdb")) as db:
        db.execute("SET TimeZone = 'Asia/Tokyo'")  # nine hours from UTC, no DST
        catch_up(two_runs, db, PROJECTIONS)
        rows = db.execute("SELECT updated_at FROM projection_checkpoints").fetchall()
    times = [row[0] for row in rows]
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    assert len(times) == len(PROJECTIONS)
    assert all(abs(now - t) < dt.timedelta(minutes=5) for t in times), (now, times)


def test_a_replaced_log_rebuilds_the_read_models(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as first:
        append(first, "run-alpha", finished_run("alpha"))
        refresh(first)
    for name in ("events.db", "events.db-wal", "events.db-shm"):
        (root / name).unlink(missing_ok=True)
    with open_store(root, create=True) as second:
        append(second, "run-beta", open_run("beta"))
        assert refresh(second) == 7
        with open_read_models(second, read_only=True) as db:
            assert db.execute("SELECT DISTINCT run_id FROM events").fetchall() == [("beta",)]
            assert db.execute("SELECT run_id FROM runs").fetchall() == [("beta",)]


# --------------------------------------------------------------------------- bad events


def test_unknown_and_undecodable_events_do_not_stop_catch_up(store: Store) -> None:
    good = open_run("beta")
    bad = [
        NewEvent("weird-1", "FromTheFuture", 1, b'{"anything": true}'),
        NewEvent("weird-2", "EpisodeCompleted", 1, b'{"submission_id": "not a number"}'),
        NewEvent("weird-3", "EpisodeCompleted", 1, b"\xff\xfe not json at all"),
        NewEvent("weird-4", "EpisodeCompleted", 7, encode(episode(1, 4, 1.0))),  # too new
        NewEvent("weird-5", "EpisodeCompleted", 0, b'{"legacy": 1}'),  # no upcaster
    ]
    append(store, "run-beta", [*good[:3], *bad, *good[3:]])
    assert refresh(store) == len(good) + len(bad)
    with open_read_models(store, read_only=True) as db:
        assert db.execute("SELECT count(*) FROM events").fetchone() == (len(good) + len(bad),)
        assert db.execute("SELECT payload FROM events WHERE event_id = 'weird-3'").fetchone() == (
            '"\ufffd\ufffd not json at all"',
        )
        assert db.execute("SELECT count(*) FROM episodes").fetchone() == (2,)
        assert records(db, "SELECT best_score FROM runs") == [{"best_score": 1.0}]
        skipped = {name: mark[2] for name, mark in checkpoints(db).items()}
    assert skipped == {"events": 1, "runs": 0, "submissions": 0, "episodes": 4}


def test_old_payload_versions_are_upcast(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def v0_to_v1(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "total_reward": data.pop("reward")}

    monkeypatch.setitem(event_module._UPCASTERS, ("EpisodeCompleted", 0), v0_to_v1)
    legacy = {"submission_id": 1, "index": 2, "status": "ok", "reward": 42.0, "steps": 9}
    append(
        store,
        "run-old",
        [
            run_created("old"),
            NewEvent("legacy-1", "EpisodeCompleted", 0, json.dumps(legacy).encode()),
        ],
    )
    refresh(store)
    with open_read_models(store, read_only=True) as db:
        assert db.execute("SELECT pool_index, total_reward, steps FROM episodes").fetchall() == [
            (2, 42.0, 9)
        ]


def test_out_of_range_integers_do_not_stop_catch_up(store: Store) -> None:
    """Integers the event schema allows but a column cannot hold become NULL; an event
    whose key cannot be stored is skipped and counted. The log is kept as it is."""
    good = open_run("beta")
    huge = [
        episode(2, 5, 1.0, steps=2**63),
        EvaluationStarted(
            submission_id=3,
            program_digest="b-3",
            indices=[2**40, 1],
            budget_reserved=2**33,
            budget_used=2**70,
        ),
        episode(3, -(2**40), 2.0, steps=-(2**64)),
        EvaluationFailed(submission_id=2**40, error="key out of range", budget_consumed=1),
        episode(2**40, 0, 3.0),
    ]
    append(store, "run-beta", [*good, *huge])
    head = len(good) + len(huge)
    assert refresh(store) == head
    with open_read_models(store, read_only=True) as db:
        marks = checkpoints(db)
        assert {mark[1] for mark in marks.values()} == {head}
        assert db.execute("SELECT count(*) FROM events").fetchone() == (head,)
        assert db.execute(
            "SELECT payload->>'$.steps' FROM events WHERE position = ?", [len(good) + 1]
        ).fetchone() == (str(2**63),)
        assert db.execute(
            "SELECT submission_id, pool_index, steps FROM episodes WHERE position > ? "
            "ORDER BY position",
            [len(good)],
        ).fetchall() == [(2, 5, None), (3, None, None), (None, 0, 100)]
        started = records(db, "SELECT * FROM submissions WHERE submission_id = 3")[0]
        assert started["indices"] == [None, 1] and started["budget_reserved"] is None
        assert started["status"] == "evaluating" and started["program_digest"] == "b-3"
        beta = records(db, "SELECT * FROM runs")[0]
        assert (beta["budget_used"], beta["submissions"], beta["failed"]) == (None, 3, 1)
        assert db.execute("SELECT count(*) FROM submissions").fetchone() == (3,)
    skipped = {name: mark[2] for name, mark in marks.items()}
    assert skipped == {"events": 0, "runs": 0, "submissions": 1, "episodes": 0}
    # The CLI catches up and queries as usual.
    result = invoke("query", "SELECT count(*) AS n FROM episodes", "--store", str(store.path))
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("batch", [1, 4, 10_000])
def test_a_data_error_in_a_projection_skips_only_that_event(
    two_runs: Store, tmp_path: Path, batch: int
) -> None:
    """A projection that fails on one event with a data error loses that event only: the
    page is split until the event is alone, then committed without that projection."""
    bad = 8  # an EpisodeCompleted of Submission 2 of alpha

    def picky(connection: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        if bad in batch.positions:
            raise OverflowError("Python int too large to convert to C long")
        EPISODES.apply(connection, batch)

    # The failing projection comes first: the others still see every event, and the rows
    # they remembered from a rolled-back page are not trusted.
    failing = [dataclasses.replace(EPISODES, apply=picky), RUNS, SUBMISSIONS, EVENTS]
    with duckdb.connect(str(tmp_path / "rm.duckdb")) as db:
        assert catch_up(two_runs, db, failing, batch=batch) == 27
        found = snapshot(db)
        marks = checkpoints(db)
    whole = fresh_build(two_runs, tmp_path, "whole")
    assert [row for row in whole["episodes"] if row[0] != bad] == found["episodes"]
    assert len(found["episodes"]) == len(whole["episodes"]) - 1
    for table in ("events", "runs", "submissions"):
        assert found[table] == whole[table], table
    assert {name: mark[1:] for name, mark in marks.items()} == {
        "episodes": (27, 1),
        "runs": (27, 0),
        "submissions": (27, 0),
        "events": (27, 0),
    }


def test_a_duckdb_data_error_inside_the_transaction_skips_only_that_event(
    two_runs: Store, tmp_path: Path
) -> None:
    """DuckDB refuses a value mid-INSERT (the transaction is then aborted): that error, not
    "Current transaction is aborted" from cleaning up after it, reaches the runner, so the
    event is skipped and the catch-up goes on."""
    bad = 8

    def create(connection: duckdb.DuckDBPyConnection) -> None:
        connection.execute("CREATE TABLE IF NOT EXISTS strict (position INTEGER)")

    def strict(connection: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        values = [str(p) if p != bad else "not a number" for p in batch.positions]
        data = pa.table({"position": pa.array(values, pa.string())})
        insert_arrow(connection, "strict", data, "CAST(position AS INTEGER)")

    picky = Projection(name="strict", version=1, tables=("strict",), create=create, apply=strict)
    with duckdb.connect(str(tmp_path / "rm.duckdb")) as db:
        assert catch_up(two_runs, db, [picky, EVENTS]) == 27
        stored = [row[0] for row in db.execute("SELECT position FROM strict ORDER BY 1").fetchall()]
        marks = checkpoints(db)
    assert stored == [p for p in range(1, 28) if p != bad]
    assert {name: mark[1:] for name, mark in marks.items()} == {
        "strict": (27, 1),
        "events": (27, 0),
    }


def test_an_error_inside_the_transaction_is_reported_as_itself(
    two_runs: Store, tmp_path: Path
) -> None:
    """An error that is no event's fault (DuckDB out of memory) rolls the page back and is
    raised as it is: it was hidden behind "Current transaction is aborted" before."""

    def create(connection: duckdb.DuckDBPyConnection) -> None:
        connection.execute("CREATE TABLE IF NOT EXISTS huge (text JSON)")

    def huge(connection: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        data = pa.table({"text": pa.array(['{"a": "' + "x" * 60_000_000 + '"}'], pa.string())})
        insert_arrow(connection, "huge", data, "text::JSON")

    hungry = Projection(name="huge", version=1, tables=("huge",), create=create, apply=huge)
    with duckdb.connect(str(tmp_path / "rm.duckdb")) as db:
        db.execute("SET memory_limit = '100MB'")
        with pytest.raises(duckdb.OutOfMemoryException):
            catch_up(two_runs, db, [hungry])
        assert checkpoints(db)["huge"][1] == 0  # nothing of the page was kept
        assert db.execute("SELECT count(*) FROM huge").fetchone() == (
            0,
        )  # the connection still works


def test_an_oversized_payload_is_trimmed_in_the_events_table(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A payload over PAYLOAD_BYTES (a RunCreated with its pool inline, from before the
    event size limit: 100 MB at the maximum budget) keeps its small fields in ``events``;
    the Run's row is whole, nothing is skipped, and query works."""
    monkeypatch.setattr(read_models, "PAYLOAD_BYTES", 1024)
    monkeypatch.setattr(read_models, "TRIMMED_BYTES", 600)
    created = msgspec.structs.replace(
        run_created("old"),
        pool=[PoolEntry(index=i, split="train", seed=i, policy_seed=i) for i in range(200)],
    )
    payload = encode(created)
    assert len(payload) > 8000
    append(
        store, "run-old", [NewEvent("old-1", "RunCreated", 1, payload), *finished_run("old")[1:]]
    )
    refresh(store)
    with open_read_models(store, read_only=True) as db:
        row = db.execute("SELECT payload FROM events WHERE type = 'RunCreated'").fetchone()
        assert row is not None
        kept = json.loads(row[0])
        assert kept["_trimmed"]["bytes"] == len(payload) and "pool" in kept["_trimmed"]["left_out"]
        assert kept["run_id"] == "old" and kept["benchmark_id"] == "toy" and "pool" not in kept
        assert len(row[0]) <= 1024
        assert db.execute("SELECT run_id, status FROM runs").fetchall() == [("old", "finished")]
        assert {name: mark[2] for name, mark in checkpoints(db).items()} == dict.fromkeys(
            ("events", "runs", "submissions", "episodes"), 0
        )
    result = invoke(
        "query", "SELECT count(*) AS n FROM events", "--store", str(store.path), "--json"
    )
    assert result.exit_code == 0 and json.loads(result.stdout) == [{"n": len(finished_run("old"))}]


def encode(event: Event) -> bytes:
    return new_event(event, "x").payload


# --------------------------------------------------------------------------- Host-private facts


def test_host_private_values_stay_out_of_the_derived_tables(two_runs: Store) -> None:
    refresh(two_runs)
    with open_read_models(two_runs, read_only=True) as db:
        payloads = " ".join(row[0] for row in db.execute("SELECT payload FROM events").fetchall())
        # The raw log carries them (the Agent never sees read models) ...
        assert all(text in payloads for text in PRIVATE_TEXT)
        # ... but no column of a derived table does, in any form.
        for table in ("runs", "submissions", "episodes"):
            rows = db.execute(f"SELECT * FROM {table}").fetchall()
            assert rows
            for value in flatten(rows):
                assert value not in PRIVATE_INTS, (table, value)
                if isinstance(value, str):
                    assert not any(text in value for text in PRIVATE_TEXT), (table, value)


def flatten(value: Any) -> Iterator[Any]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from flatten(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from flatten(item)
    else:
        yield value


# --------------------------------------------------------------------------- one writer


def test_a_held_database_is_a_clear_busy_error(
    two_runs: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    refresh(two_runs)
    monkeypatch.setattr(read_models, "LOCK_WAIT_S", 0.3)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; db = duckdb.connect(sys.argv[1]); print('held', flush=True); "
            "sys.stdin.read()",
            str(two_runs.read_models_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(ReadModelsBusy, match="being updated by another process; try again"):
            refresh(two_runs, wait_s=0.3)
        assert time.monotonic() - started >= 0.3
        for extra in ([], ["--no-refresh"]):
            result = invoke("query", "SELECT 1", "--store", str(two_runs.path), *extra)
            line = assert_one_line_error(result, 1)
            assert "another process" in line
            assert line == "error: read models are in use by another process; try again"
    finally:
        holder.communicate("")
    assert refresh(two_runs) == 27  # released: works again


HOLDER = """
import duckdb, sys, time
db = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read")
writing = float(sys.argv[3])
if writing:
    db.execute("CREATE TABLE IF NOT EXISTS holder_ticks (t DOUBLE)")
print("held", flush=True)
end = time.monotonic() + writing
while time.monotonic() < end:  # commit after commit, as a long catch-up does
    db.execute("INSERT INTO holder_ticks VALUES (?)", [time.time()])
    time.sleep(0.05)
if not writing:
    sys.stdin.read()
"""


@contextlib.contextmanager
def held(path: Path, mode: str, writing_s: float = 0.0) -> Iterator[subprocess.Popen[str]]:
    """Another process with the read models open (``mode`` "read" or "write")."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), mode, str(writing_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.communicate("")


def test_a_reader_elsewhere_means_stale_results_not_an_error(
    two_runs: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process only reading the read models: they cannot be caught up, but they
    can be read, so the query runs on them as they are and says so on stderr."""
    refresh(two_runs)
    append(two_runs, "run-beta", [RunFinished(reason="agent_exited")])
    monkeypatch.setattr(read_models, "LOCK_WAIT_S", 0.5)
    store = str(two_runs.path)
    count = "SELECT count(*) AS n FROM events"
    with held(two_runs.read_models_path, "read"):
        result = invoke("query", count, "--store", store, "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout) == [{"n": 27}]
        assert result.stderr.splitlines() == [query_module.STALE_NOTE]
        quiet = invoke("query", count, "--store", store, "--json", "--no-refresh")
        assert (quiet.exit_code, quiet.stderr) == (0, "")
        assert json.loads(quiet.stdout) == [{"n": 27}]
        with pytest.raises(ReadModelsBusy, match="being read by another process; try again"):
            refresh(two_runs, wait_s=0.1)
    result = invoke("query", count, "--store", store, "--json")
    assert (result.exit_code, result.stderr) == (0, "")
    assert json.loads(result.stdout) == [{"n": 28}]


def test_a_writer_that_keeps_writing_is_waited_for(
    two_runs: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long catch-up in another process (it commits page after page) is waited for past
    LOCK_WAIT_S; the query then catches up itself."""
    refresh(two_runs)
    append(two_runs, "run-beta", [RunFinished(reason="agent_exited")])
    monkeypatch.setattr(read_models, "LOCK_WAIT_S", 1.5)
    with held(two_runs.read_models_path, "write", writing_s=4.0):
        result = invoke("query", "SELECT count(*) AS n FROM events", "--store", str(two_runs.path))
    assert result.exit_code == 0, result.stderr
    # Held for longer than LOCK_WAIT_S, yet no error and no stale note: waited, then caught up.
    assert result.stderr == "" and "28" in result.stdout


@pytest.mark.parametrize(
    "error", [RuntimeError("disk on\nfire"), duckdb.IOException("short write"), KeyError("x")]
)
def test_an_unexpected_refresh_error_is_one_line(
    two_runs: Store, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def broken(*args: Any, **kw: Any) -> int:
        raise error

    monkeypatch.setattr(read_models, "catch_up", broken)
    result = invoke("query", "SELECT 1", "--store", str(two_runs.path))
    line = assert_one_line_error(result, 1)
    assert type(error).__name__ in line and "--no-refresh" in line
    assert " ".join(str(error).split()) in line


# --------------------------------------------------------------------------- evopolicy query


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        runner = CliRunner(mix_stderr=False)
    else:
        runner = CliRunner()
    result = runner.invoke(main, list(args), prog_name="evopolicy", env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def assert_one_line_error(result: Result, exit_code: int) -> str:
    assert result.exit_code == exit_code, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


RUNS_SQL = (
    "SELECT run_id, status, best_score, submissions, created_at IS NOT NULL AS dated "
    "FROM runs ORDER BY run_id"
)


def test_query_json(two_runs: Store) -> None:
    result = invoke("query", RUNS_SQL, "--store", str(two_runs.path), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {
            "run_id": "alpha",
            "status": "finished",
            "best_score": 21.0,
            "submissions": 3,
            "dated": True,
        },
        # No Host holds beta: its Host died without a word, as record list says too
        {
            "run_id": "beta",
            "status": "interrupted",
            "best_score": 1.0,
            "submissions": 2,
            "dated": True,
        },
    ]
    from evopolicygym.run.liveness import run_lock

    with run_lock(two_runs, "beta"):  # while a Host holds it, it is running
        held = invoke(
            "query",
            "SELECT status FROM runs WHERE run_id = 'beta'",
            "--store",
            str(two_runs.path),
            "--json",
        )
        assert json.loads(held.stdout) == [{"status": "running"}]
    # JSON payloads come out as objects, lists as lists, timestamps as ISO text.
    result = invoke(
        "query",
        "SELECT payload, indices, started_at FROM events JOIN submissions USING (run_id) "
        "WHERE type = 'RunFinished' AND submission_id = 2",
        "--store",
        str(two_runs.path),
        "--json",
    )
    [row] = json.loads(result.stdout)
    assert row["payload"]["reason"] == "finished" and row["indices"] == [2, 3]
    assert isinstance(row["started_at"], str) and "T" in row["started_at"]


def test_query_csv(two_runs: Store) -> None:
    result = invoke("query", RUNS_SQL, "--store", str(two_runs.path), "--csv")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "run_id,status,best_score,submissions,dated",
        "alpha,finished,21.0,3,True",
        "beta,interrupted,1.0,2,True",
    ]
    lists = invoke(
        "query",
        "SELECT submission_id, indices, error FROM submissions WHERE run_id = 'alpha' ORDER BY 1",
        "--store",
        str(two_runs.path),
        "--csv",
    )
    assert lists.stdout.splitlines() == [
        "submission_id,indices,error",
        '1,"[0,1]",',
        '2,"[2,3]",',
        "3,[4],runner crashed",
    ]


def test_query_table_and_store_from_the_environment(two_runs: Store) -> None:
    result = invoke(
        "query",
        "SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY n DESC, type",
        env={STORE_ENV: str(two_runs.path)},
    )
    assert result.exit_code == 0, result.stderr
    assert "EpisodeCompleted" in result.stdout and "RunCreated" in result.stdout
    assert "13 rows" in result.stdout


def test_query_refreshes_unless_told_not_to(two_runs: Store) -> None:
    store = str(two_runs.path)
    result = invoke("query", "SELECT 1", "--store", store, "--no-refresh")
    line = assert_one_line_error(result, 1)
    assert "no read models" in line and str(two_runs.read_models_path) in line
    count = "SELECT count(*) AS n FROM events"
    assert json.loads(invoke("query", count, "--store", store, "--json").stdout) == [{"n": 27}]
    append(two_runs, "run-beta", [RunFinished(reason="agent_exited")])
    stale = invoke("query", count, "--store", store, "--json", "--no-refresh")
    assert json.loads(stale.stdout) == [{"n": 27}]
    assert json.loads(invoke("query", count, "--store", store, "--json").stdout) == [{"n": 28}]


def test_query_is_read_only(two_runs: Store) -> None:
    result = invoke("query", "DELETE FROM submissions", "--store", str(two_runs.path))
    line = assert_one_line_error(result, 1)
    assert "read-only" in line.lower()
    # runs is the view that says which unfinished Runs are interrupted: not a table to change
    line = assert_one_line_error(
        invoke("query", "DELETE FROM runs", "--store", str(two_runs.path)), 1
    )
    assert line.startswith("error: query failed:")


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (SELECT 'x') TO '{store}/events.db'",  # would overwrite the log
        "COPY (SELECT 1) TO '{store}/elsewhere.csv'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('{store}/events.db')",
        "SELECT * FROM glob('{store}/*')",
        "ATTACH '{store}/events.db' AS log (TYPE sqlite)",
        "EXPORT DATABASE '{store}/dump'",
        "INSTALL httpfs",
        "LOAD sqlite_scanner",
        "SET enable_external_access = true",
        "SET lock_configuration = false",
    ],
)
def test_query_touches_nothing_but_the_read_models(two_runs: Store, sql: str) -> None:
    """``query`` runs the user's SQL: no file may be read or written through it (the log
    is a file beside the read models), no extension loaded, no setting turned back."""
    root = two_runs.path
    assert invoke("query", "SELECT 1", "--store", str(root)).exit_code == 0  # the read models exist
    log = (root / "events.db").read_bytes()
    before = sorted(p.name for p in root.iterdir())
    line = assert_one_line_error(invoke("query", sql.format(store=root), "--store", str(root)), 1)
    assert line.startswith("error: query failed:")
    assert (root / "events.db").read_bytes() == log
    assert sorted(p.name for p in root.iterdir()) == before
    ok = invoke("query", "SELECT count(*) AS n FROM runs", "--store", str(root), "--json")
    assert json.loads(ok.stdout) == [{"n": 2}]


def test_bad_sql_is_a_one_line_error(two_runs: Store) -> None:
    result = invoke("query", "SELEC nonsense FROM\nnowhere", "--store", str(two_runs.path))
    line = assert_one_line_error(result, 1)
    assert line.startswith("error: query failed:") and "syntax error" in line.lower()
    result = invoke("query", "SELECT * FROM no_such_table", "--store", str(two_runs.path), "--json")
    assert "no_such_table" in assert_one_line_error(result, 1)


def test_missing_store_is_a_one_line_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    line = assert_one_line_error(invoke("query", "SELECT 1", "--store", str(missing)), 1)
    assert str(missing) in line
    line = assert_one_line_error(invoke("query", "SELECT 1", env={STORE_ENV: str(missing)}), 1)
    assert str(missing) in line
    assert not missing.exists()


def test_unreadable_read_models_are_a_one_line_error(two_runs: Store) -> None:
    two_runs.read_models_path.write_bytes(b"not a database" * 1000)
    line = assert_one_line_error(invoke("query", "SELECT 1", "--store", str(two_runs.path)), 1)
    assert str(two_runs.read_models_path) in line and "delete the file" in line
    two_runs.read_models_path.unlink()
    assert invoke("query", "SELECT 1", "--store", str(two_runs.path)).exit_code == 0


def test_json_and_csv_together_is_a_usage_error(two_runs: Store) -> None:
    result = invoke("query", "SELECT 1", "--store", str(two_runs.path), "--json", "--csv")
    assert "mutually exclusive" in assert_one_line_error(result, 2)


@pytest.mark.parametrize("sql", ["", "   ", "-- only a comment", "/* nothing */ ;"])
def test_no_statement_is_a_one_line_error(two_runs: Store, sql: str) -> None:
    result = invoke("query", "--store", str(two_runs.path), "--json", "--", sql)
    assert assert_one_line_error(result, 1) == "error: no statement to run"


def test_the_table_escapes_terminal_control_characters(two_runs: Store) -> None:
    raw = "\x1b]0;PWNED\x07\x1b[2J boom\x7f\x9b\ttab"
    append(two_runs, "run-beta", [EvaluationFailed(submission_id=9, error=raw, budget_consumed=1)])
    store = str(two_runs.path)
    sql = (
        'SELECT error AS "err\x1b[31m" FROM submissions '
        "WHERE error IS NOT NULL AND run_id = 'beta'"
    )
    table = invoke("query", sql, "--store", store)
    assert table.exit_code == 0, table.stderr
    assert not any(c in table.stdout for c in "\x1b\x07\x7f\x9b\t")
    assert "\\x1b]0;PWNED\\x07\\x1b[2J boom\\x7f\\x9b\\x09tab" in table.stdout
    assert "err\\x1b[31m" in table.stdout
    # JSON and CSV carry the value exactly.
    [row] = json.loads(invoke("query", sql, "--store", store, "--json").stdout)
    assert row == {"err\x1b[31m": raw}
    assert raw in invoke("query", sql, "--store", store, "--csv").stdout


def test_json_timestamps_are_utc_and_non_finite_numbers_are_strings(two_runs: Store) -> None:
    sql = (
        "SELECT TIMESTAMP '2024-01-02 03:04:05.5' AS t, "
        "TIMESTAMPTZ '2024-01-02 03:04:05+02' AS tz, 'nan'::DOUBLE AS n, "
        "'inf'::DOUBLE AS i, '-inf'::FLOAT AS m, [1.5, 'nan'::DOUBLE] AS l, "
        "NULL::DOUBLE AS z, 0.25::DOUBLE AS f"
    )
    result = invoke("query", sql, "--store", str(two_runs.path), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {
            "t": "2024-01-02T03:04:05.500000Z",
            "tz": "2024-01-02T01:04:05Z",
            "n": "NaN",
            "i": "Infinity",
            "m": "-Infinity",
            "l": [1.5, "NaN"],
            "z": None,
            "f": 0.25,
        }
    ]
    marks = invoke(
        "query", "SELECT updated_at FROM projection_checkpoints", "--store", str(two_runs.path)
    )
    assert marks.exit_code == 0
    stamps = json.loads(
        invoke(
            "query",
            "SELECT updated_at FROM projection_checkpoints",
            "--store",
            str(two_runs.path),
            "--json",
        ).stdout
    )
    now = dt.datetime.now(dt.UTC)
    for stamp in stamps:
        assert stamp["updated_at"].endswith("Z")
        at = dt.datetime.fromisoformat(stamp["updated_at"])
        assert abs(now - at) < dt.timedelta(minutes=5)
    help_text = invoke("query", "--help").stdout
    assert '"NaN", "Infinity" and' in help_text and "Z suffix" in help_text


# ------------------------------------------------------------------- speed (reported, not asserted)


def test_catch_up_rate_on_100k_events(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    total, per_submission = 100_000, 16
    events: list[Event] = [run_created("speed")]
    submission = 0
    while len(events) < total:
        submission += 1
        events.append(
            AgentMessages(
                attempt=1, chunk=submission, messages=[Message(role="assistant", content="hm")]
            )
        )
        events.append(
            EvaluationStarted(
                submission_id=submission,
                program_digest=f"p{submission}",
                indices=list(range(per_submission)),
                budget_reserved=per_submission,
                budget_used=per_submission * submission,
            )
        )
        events.extend(episode(submission, i % 6, float(i)) for i in range(per_submission))
        events.append(
            SubmissionPublished(
                submission_id=submission,
                program_digest=f"p{submission}",
                score=float(submission % 97),
                failures=0,
                budget_used=per_submission * submission,
                budget_left=0,
            )
        )
    events = events[:total]
    for k in range(0, total, 10_000):
        append(store, "run-speed", events[k : k + 10_000])
    started = time.perf_counter()
    assert refresh(store) == total
    elapsed = time.perf_counter() - started
    with open_read_models(store, read_only=True) as db:
        started = time.perf_counter()
        by_type = db.execute("SELECT type, count(*) FROM events GROUP BY type").fetchall()
        grouped = time.perf_counter() - started
        assert sum(n for _, n in by_type) == total
        started_count = sum(isinstance(e, EvaluationStarted) for e in events)
        assert db.execute("SELECT count(*) FROM submissions").fetchone() == (started_count,)
    with capsys.disabled():
        print(
            f"\ncatch-up: {total:,} events in {elapsed:.2f}s ({total / elapsed:,.0f} events/s); "
            f"GROUP BY type: {grouped * 1000:.1f} ms"
        )


def test_projection_api_is_usable_for_a_custom_projection(two_runs: Store, tmp_path: Path) -> None:
    """A projection outside read_models: counts per type, written with plain SQL."""

    def create(connection: duckdb.DuckDBPyConnection) -> None:
        connection.execute("CREATE TABLE type_counts (type VARCHAR PRIMARY KEY, n BIGINT)")

    def apply(connection: duckdb.DuckDBPyConnection, batch: Batch) -> None:
        envelopes = batch.envelopes()
        assert [e.position for e in envelopes] == list(batch.positions)
        assert envelopes == two_runs.events.read_all(batch.first - 1, len(batch))
        for kind in set(batch.types):
            n = batch.types.count(kind)
            connection.execute(
                "INSERT INTO type_counts VALUES (?, ?) "
                "ON CONFLICT DO UPDATE SET n = n + excluded.n",
                [kind, n],
            )

    counts = Projection("type_counts", 1, ("type_counts",), create, apply)
    with duckdb.connect(str(tmp_path / "custom.duckdb")) as db:
        assert catch_up(two_runs, db, [counts], batch=4) == 27
        found = dict(db.execute("SELECT * FROM type_counts").fetchall())
    assert found["EpisodeCompleted"] == 6 and sum(found.values()) == 27

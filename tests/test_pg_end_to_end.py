"""A store in PostgreSQL, end to end through the CLI: Runs (one at a time, two at once, one
SIGKILLed and resumed), list, show, replay, verify (a damaged blob found and named), query,
export and the analysis frames, all over the log and blobs in the database."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pytest

from evopolicygym.records.events import (
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    SubmissionPublished,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.verify import verify_store
from evopolicygym.run.ledger import load_run
from evopolicygym.run.liveness import host_alive
from tests.support import pg

ROOT = Path(__file__).resolve().parent.parent
RUN_ARGS = (
    "run", "--benchmark", "cartpole", "--agent", "reference",
    "--validation-episodes", "2", "--assessment-episodes", "2", "--max-candidates", "2",
)  # fmt: skip


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A store URL naming a database no one made yet (``record create`` makes it); the
    store's local cache under the test's directory."""
    pg.require_postgres()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        yield pg.url_of(pg.database_for(tmp_path))
    finally:
        pg.drop_made()


def cli(
    *args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if check:
        assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done


def tamper(url: str, statement: str, *args: Any) -> None:
    """Change rows behind the append-only triggers, as a superuser in the replica role may."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET session_replication_role = replica")
        connection.execute(statement, args or None)


def check_run(url: str, run_id: str, budget: int) -> None:
    """The Run ended, its chain is valid and its budget is exactly what its Episodes used."""
    with open_store(url) as store:
        state, events = load_run(store, run_id)
        report = verify_store(store)
    assert report.ok, [p.describe() for p in report.problems]
    assert state.finished in ("finished", "budget_exhausted"), state.finished
    started = [e for e in events if isinstance(e, EvaluationStarted)]
    ended = [e for e in events if isinstance(e, SubmissionPublished | EvaluationFailed)]
    assert [e.submission_id for e in started] == [e.submission_id for e in ended]
    assert state.budget_used == sum(len(e.indices) for e in started) == budget
    episodes = collections.Counter(
        (e.submission_id, e.index) for e in events if isinstance(e, EpisodeCompleted)
    )
    assert set(episodes.values()) == {1}, "an Episode was recorded twice"


@pytest.mark.timeout(900)
def test_a_run_recorded_queried_verified_and_exported(url: str, tmp_path: Path) -> None:
    created = cli("record", "--store", url, "create")
    assert created.stdout.strip() == f"created store at {url}"
    assert "already exists (0 events)" in cli("record", "--store", url, "create").stdout
    outcome = json.loads(cli(*RUN_ARGS, "--budget", "8", "--store", url, "--json").stdout)
    run_id = outcome["run_id"]
    assert outcome["status"] == "finished", outcome
    check_run(url, run_id, 8)

    (listed,) = json.loads(cli("record", "list", "--store", url, "--json").stdout)
    assert (listed["run_id"], listed["status"], listed["benchmark_id"]) == (
        run_id,
        "finished",
        "cartpole",
    )
    shown = json.loads(cli("record", "show", run_id, "--store", url, "--json").stdout)
    assert shown["run_id"] == run_id and shown["status"] == "finished"
    replayed = cli("record", "replay", run_id, "--store", url)
    assert run_id in replayed.stdout
    verified = json.loads(cli("record", "verify", "--store", url, "--json").stdout)
    assert verified["ok"] and verified["events"] == outcome_events(url) and verified["blobs"] > 5

    rows = json.loads(
        cli(
            "query", "--store", url, "--json", "SELECT run_id, status, budget_used FROM runs"
        ).stdout
    )
    assert rows == [{"run_id": run_id, "status": "finished", "budget_used": 8}]
    with open_store(url) as store:  # the read models are this machine's cache, not the database's
        assert store.read_models_path.is_file() and store.read_models_path.is_relative_to(
            tmp_path / "cache"
        )
        from evopolicygym.analysis import runs_df

        frame = runs_df(store)
    assert list(frame["run_id"]) == [run_id] and list(frame["budget_used"]) == [8]

    out = tmp_path / "dataset"
    cli("export", "--store", url, "--format", "sft", "--format", "programs", "-o", str(out))
    sft = [row for split in datasets.load_dataset(str(out), "sft").values() for row in split]
    programs = [
        row for split in datasets.load_dataset(str(out), "programs").values() for row in split
    ]
    assert [row["run_id"] for row in sft] == [run_id]
    assert programs and {row["run_id"] for row in programs} == {run_id}

    # A blob the Run references, damaged behind the triggers: verify finds it and names it.
    with open_store(url) as store:
        _, events = load_run(store, run_id)
    published = next(e for e in events if isinstance(e, SubmissionPublished))
    digest = published.program_digest
    import psycopg

    with psycopg.connect(url) as connection:
        (tree,) = (
            connection.execute(
                "SELECT tree FROM program_trees WHERE digest = %s", (digest,)
            ).fetchone()
            or ()
        )
    tamper(
        url,
        "UPDATE blob_chunks SET data = set_byte(data, 3, get_byte(data, 3) # 1) WHERE digest = %s",
        tree,
    )
    damaged = cli("record", "verify", "--store", url, "--json", check=False)
    assert damaged.returncode != 0
    report = json.loads(damaged.stdout)
    assert not report["ok"]
    kinds = {(p["kind"], p["blob"]) for p in report["problems"]}
    assert ("blob_corrupt", digest) in kinds, kinds
    assert any(tree in p["message"] for p in report["problems"])


def outcome_events(url: str) -> int:
    with open_store(url) as store:
        return store.events.head()


@pytest.mark.timeout(900)
def test_sigkill_mid_run_then_resume_on_postgres(url: str) -> None:
    cli("record", "--store", url, "create")
    host = subprocess.Popen(
        [sys.executable, "-m", "evopolicygym.cli", *RUN_ARGS, "--budget", "16", "--store", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        run_id = None
        while host.poll() is None and time.monotonic() < deadline:
            with open_store(url) as store:
                streams = store.events.streams("run-")
            # Mid-Run: some Submissions published, the budget not yet spent.
            if streams and streams[0].version >= 12:
                run_id = streams[0].stream_id[len("run-") :]
                break
            time.sleep(0.05)
        assert host.poll() is None, "the Run ended before it could be killed"
        host.send_signal(signal.SIGKILL)
    finally:
        host.wait()
    assert run_id is not None
    with open_store(url) as store:
        deadline = time.monotonic() + 10
        while host_alive(store, run_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        state, _ = load_run(store, run_id)
        assert state.finished is None
        assert verify_store(store).ok
    listed = json.loads(cli("record", "list", "--store", url, "--json").stdout)
    assert [row["status"] for row in listed] == ["interrupted"]
    cli("resume", run_id, "--store", url)
    check_run(url, run_id, 16)


@pytest.mark.timeout(900)
def test_two_processes_record_runs_into_one_store_at_once(url: str) -> None:
    cli("record", "--store", url, "create")
    command = [
        sys.executable,
        "-m",
        "evopolicygym.cli",
        *RUN_ARGS,
        "--budget",
        "8",
        "--store",
        url,
        "--json",
    ]
    hosts = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outcomes = []
    for host in hosts:
        out, err = host.communicate(timeout=600)
        assert host.returncode == 0, err[-3000:]
        outcomes.append(json.loads(out))
    run_ids = {outcome["run_id"] for outcome in outcomes}
    assert len(run_ids) == 2
    for run_id in run_ids:
        check_run(url, run_id, 8)
    with open_store(url) as store:
        positions = [row[0] for row in store.events.read_all_rows(0, 100_000)]
    assert positions == list(range(1, len(positions) + 1))
    rows = json.loads(
        cli("query", "--store", url, "--json", "SELECT run_id FROM runs ORDER BY run_id").stdout
    )
    assert {row["run_id"] for row in rows} == run_ids


def test_store_urls_in_messages_mask_the_password(url: str) -> None:
    secret = url.replace("postgres@", "postgres:hunter2@", 1)  # trust auth: any password will do
    created = cli("record", "--store", secret, "create")
    assert "hunter2" not in created.stdout + created.stderr and "postgres:***@" in created.stdout
    missing = cli("record", "show", "nosuchrun", "--store", secret, check=False)
    assert missing.returncode == 1 and "hunter2" not in missing.stdout + missing.stderr
    assert "***" in missing.stderr


@pytest.mark.timeout(900)
def test_another_machine_sees_the_run_carried_then_resumes_it(url: str, tmp_path: Path) -> None:
    """Two machines, told apart by their local caches: B sees the Run A carries as running
    (its Host's lock is in the database, not in A's files), sees it interrupted once A's
    Host is killed, and resumes it to its end."""
    machine_a = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "a")}
    machine_b = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "b")}
    cli("record", "--store", url, "create", env=machine_a)
    host = subprocess.Popen(
        [sys.executable, "-m", "evopolicygym.cli", *RUN_ARGS, "--budget", "16", "--store", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=machine_a,
    )
    try:
        deadline = time.monotonic() + 300
        while host.poll() is None and time.monotonic() < deadline:
            with open_store(url) as store:
                streams = store.events.streams("run-")
            if streams and streams[0].version >= 8:
                break
            time.sleep(0.05)
        assert host.poll() is None, "the Run ended before machine B looked"
        (seen,) = json.loads(cli("record", "list", "--store", url, "--json", env=machine_b).stdout)
        assert seen["status"] == "running"
        run_id = seen["run_id"]
        host.send_signal(signal.SIGKILL)
    finally:
        host.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        (seen,) = json.loads(cli("record", "list", "--store", url, "--json", env=machine_b).stdout)
        if seen["status"] == "interrupted":
            break
    assert seen["status"] == "interrupted"
    cli("resume", run_id, "--store", url, env=machine_b)
    check_run(url, run_id, 16)

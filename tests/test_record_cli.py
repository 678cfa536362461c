"""``evopolicy record`` and ``verify_store`` on a real store with realistic Runs and blobs."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evopolicygym.program import Program
from evopolicygym.records import verify as verify_module
from evopolicygym.records.events import (
    AgentExited,
    AgentStarted,
    RunFinished,
    SubmissionRejected,
)
from evopolicygym.records.location import STORE_ENV, open_store
from evopolicygym.records.verify import verify_store
from evopolicygym.run.liveness import run_lock
from tests.support.blobdamage import lose_blob, lose_program, overwrite_blob
from tests.support.cli import invoke, one_line_error
from tests.support.record_store import (
    ASSESSMENT_SEED,
    DERIVED_SEEDS,
    POLICY_SEED,
    POLICY_V1,
    POOL_SEED,
    RUN_SEED,
    VALIDATION_SEED,
    Built,
    Writer,
    build_store,
    run_created,
    store_args,
)

ROOT = Path(__file__).resolve().parent.parent

PRIVATE_VALUES = [
    str(RUN_SEED),
    *(str(POOL_SEED + i) for i in range(4)),
    *(str(POLICY_SEED + i) for i in range(4)),
    *(str(v) for v in DERIVED_SEEDS.values()),
    str(VALIDATION_SEED),
    str(ASSESSMENT_SEED),
]


@pytest.fixture
def built(tmp_path: Path) -> Built:
    return build_store(tmp_path / "store")


def tamper_payload(root: Path, position: int) -> None:
    """Flip one byte of a stored payload behind the log's back (triggers dropped first)."""
    connection = sqlite3.connect(root / "events.db")
    try:
        connection.execute("DROP TRIGGER events_no_update")
        (payload,) = connection.execute(
            "SELECT payload FROM events WHERE position = ?", (position,)
        ).fetchone()
        flipped = bytearray(payload)
        index = flipped.index(b'"') + 1  # inside the first key: still JSON, different bytes
        flipped[index] ^= 0x01
        connection.execute(
            "UPDATE events SET payload = ? WHERE position = ?", (bytes(flipped), position)
        )
        connection.commit()
    finally:
        connection.close()


def tamper_column(root: Path, position: int, column: str, value: object) -> None:
    connection = sqlite3.connect(root / "events.db")
    try:
        connection.execute("DROP TRIGGER events_no_update")
        connection.execute(f"UPDATE events SET {column} = ? WHERE position = ?", (value, position))
        connection.commit()
    finally:
        connection.close()


# --------------------------------------------------------------------------- list / show


def test_list_text_and_json(built: Built) -> None:
    result = invoke(*store_args(built, "list"))
    assert result.exit_code == 0, result.output
    assert "alpha" in result.stdout and "beta" in result.stdout
    assert "host-1" not in result.stdout
    assert "cartpole" in result.stdout and "finished" in result.stdout

    rows = json.loads(invoke(*store_args(built, "list", "--json")).stdout)
    by_id = {row["run_id"]: row for row in rows}
    assert set(by_id) == {"alpha", "beta"}
    alpha, beta = by_id["alpha"], by_id["beta"]
    assert alpha["stream_id"] == "run-alpha"
    assert alpha["version"] == alpha["events"] == 16
    assert alpha["benchmark_id"] == "cartpole"
    assert alpha["status"] == alpha["terminal_reason"] == "finished"
    assert alpha["assessment_score"] == 188.75
    assert alpha["created_at"].endswith("Z")
    # No Host holds beta, so it is a Run whose Host died; while one does, it is running.
    assert beta["status"] == "interrupted" and beta["events"] == 2
    with open_store(built.root) as store, run_lock(store, "beta"):
        rows = json.loads(invoke(*store_args(built, "list", "--json")).stdout)
        assert {row["run_id"]: row["status"] for row in rows}["beta"] == "running"


def test_list_empty_store(tmp_path: Path) -> None:
    assert invoke("record", "--store", str(tmp_path / "s"), "create").exit_code == 0
    result = invoke("record", "--store", str(tmp_path / "s"), "list")
    assert result.exit_code == 0 and "no runs" in result.stdout
    assert (
        json.loads(invoke("record", "--store", str(tmp_path / "s"), "list", "--json").stdout) == []
    )


def test_show_json_summary(built: Built) -> None:
    result = invoke(*store_args(built, "show", "alpha", "--json"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["run_id"] == "alpha"
    assert summary["benchmark_id"] == "cartpole"
    assert summary["agent"]["name"] == "reference"
    assert summary["config"]["budget"] == 16
    assert summary["pool_size"] == 4
    assert summary["initial_program_digest"] == built.blobs["initial"]
    assert summary["budget_used"] == 2 and summary["budget_left"] == 14
    assert summary["rejections"] == 1
    [submission] = summary["submissions"]
    assert submission == {
        "submission_id": 1,
        "program_digest": built.blobs["improved"],
        "parent_program_digest": built.blobs["initial"],
        "status": "published",
        "score": 193.5,
        "failures": 0,
        "episodes": 2,
        "validation_score": 190.25,
        "error": None,
    }
    assert summary["final_submission_id"] == 1 and summary["final_selection"]["score"] == 190.25
    assert summary["validation_score"] == 190.25
    assert summary["assessment"]["score"] == summary["assessment_score"] == 188.75
    assert summary["status"] == summary["terminal_reason"] == "finished"
    assert "terminal" not in summary and "final_submission" not in summary
    assert "pool" not in summary and "seeds" not in summary


def test_show_accepts_stream_id_and_text(built: Built) -> None:
    as_stream = json.loads(invoke(*store_args(built, "show", "run-alpha", "--json")).stdout)
    assert as_stream["run_id"] == "alpha"
    text = invoke(*store_args(built, "show", "run-alpha"))
    assert text.exit_code == 0, text.output
    for expected in ("alpha", "cartpole", "reference", "193.5", "190.25", "188.75", "finished"):
        assert expected in text.stdout
    assert "4 Episodes" in text.stdout


@pytest.mark.parametrize("run", ["alpha", "beta"])
@pytest.mark.parametrize("as_json", [False, True])
def test_show_never_prints_private_seeds(built: Built, run: str, as_json: bool) -> None:
    result = invoke(*store_args(built, "show", run, *(["--json"] if as_json else [])))
    assert result.exit_code == 0, result.output
    for value in PRIVATE_VALUES:
        assert value not in result.stdout, value
        assert value not in result.stderr, value


def test_events_text_summaries_hide_seeds(built: Built) -> None:
    result = invoke(*store_args(built, "events", "alpha"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 16
    assert "RunCreated" in lines[0] and "pool=4" in lines[0]
    assert "messages=2" in lines[2]
    assert "RunFinished" in lines[-1] and "reason=finished" in lines[-1]
    for value in PRIVATE_VALUES:
        assert value not in result.stdout
    beta = invoke(*store_args(built, "events", "beta"))  # its pool is a blob: the size shows
    assert beta.exit_code == 0 and "pool=4" in beta.stdout and "pool_blob" not in beta.stdout


def test_unknown_run_is_one_line_error(built: Built) -> None:
    for command in ("show", "events", "verify"):
        line = one_line_error(invoke(*store_args(built, command, "gamma")))
        assert "gamma" in line and "record list" in line


# --------------------------------------------------------------------------- events


def test_events_json_lines(built: Built) -> None:
    result = invoke(*store_args(built, "events", "alpha", "--json"))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["stream_version"] for r in records] == list(range(1, 17))
    assert all(r["stream_id"] == "run-alpha" for r in records)
    first = records[0]
    assert set(first) == {
        "position",
        "stream_id",
        "stream_version",
        "event_id",
        "type",
        "schema_version",
        "recorded_at",
        "payload",
        "payload_hash",
        "prev_hash",
        "hash",
    }
    assert first["type"] == "RunCreated" and first["payload"]["run_id"] == "alpha"
    assert first["position"] == built.positions["created"]
    assert records[-1]["type"] == "RunFinished"
    # Positions are global: beta's and host-1's events sit between alpha's.
    assert records[1]["position"] > first["position"] + 1

    later = invoke(*store_args(built, "events", "alpha", "--json", "--from-version", "14"))
    assert [json.loads(line)["stream_version"] for line in later.stdout.splitlines()] == [15, 16]


def test_events_follow_stops_at_run_finished_already_recorded(built: Built) -> None:
    result = invoke(*store_args(built, "events", "alpha", "--follow", "--json"))
    assert result.exit_code == 0
    assert json.loads(result.stdout.splitlines()[-1])["type"] == "RunFinished"


@pytest.mark.timeout(60)
def test_events_follow_subprocess(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        writer = Writer(store)
        initial = store.blobs.put_program(Program.from_files({"policy.py": POLICY_V1}))
        writer.append("run-live", run_created("live", initial))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop(STORE_ENV, None)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evopolicygym.cli",
                "record",
                "--store",
                str(root),
                "events",
                "live",
                "--follow",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert process.stdout is not None
        watchdog = threading.Timer(45, process.kill)
        watchdog.start()
        try:
            seen = [json.loads(process.stdout.readline())]
            assert seen[0]["type"] == "RunCreated"
            writer.append("run-live", AgentStarted(attempt=1))
            seen.append(json.loads(process.stdout.readline()))
            assert seen[1]["type"] == "AgentStarted"  # printed while the Run is still open
            time.sleep(0.3)
            writer.append("run-other", AgentStarted(attempt=7))  # another stream: not printed
            writer.append(
                "run-live",
                AgentExited(attempt=1, exit_code=0),
                RunFinished(reason="agent_exited"),
            )
            out, err = process.communicate(timeout=30)
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, err
    seen += [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in seen] == ["RunCreated", "AgentStarted", "AgentExited", "RunFinished"]
    assert [r["stream_version"] for r in seen] == [1, 2, 3, 4]
    assert seen[-1]["payload"] == {
        "reason": "agent_exited",
        "final_submission_id": None,
        "validation_score": None,
        "assessment_score": None,
        "handoff": None,
        "reference_score": None,
        "improved": None,
    }


# --------------------------------------------------------------------------- verify


def test_verify_intact(built: Built) -> None:
    result = invoke(*store_args(built, "verify"))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"ok: {built.events} events, {built.blob_count} blobs verified\n"
    report = json.loads(invoke(*store_args(built, "verify", "--json")).stdout)
    assert report["ok"] is True and report["problems"] == [] and report["first_problem"] is None
    beta = invoke(*store_args(built, "verify", "beta"))
    # beta's program and its pool's manifest (the pool's chunks are read through it)
    assert beta.exit_code == 0 and beta.stdout.startswith("ok: 2 events, 2 blobs verified")


def test_verify_pages_through_the_log(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_module, "PAGE", 3)
    with open_store(built.root) as store:
        report = verify_store(store)
    assert report.ok and report.events == built.events == report.head


def test_verify_flipped_payload_byte(built: Built) -> None:
    position = built.positions["episode1"]
    tamper_payload(built.root, position)
    result = invoke(*store_args(built, "verify"))
    assert result.exit_code == 1
    line = one_line_error(result)
    assert f"position {position} " in line and "payload" in line
    assert result.stdout.splitlines()[0].startswith(f"position {position} (run-alpha v")

    report = json.loads(invoke(*store_args(built, "verify", "--json")).stdout)
    assert report["ok"] is False
    assert report["first_problem"]["position"] == position
    assert report["first_problem"]["kind"] == "payload_hash"
    assert {p["position"] for p in report["problems"]} == {position}

    # The chain covers payload hashes, not payloads: another Run's verify stays clean.
    assert invoke(*store_args(built, "verify", "beta")).exit_code == 0
    assert invoke(*store_args(built, "verify", "run-alpha")).exit_code == 1


def test_verify_reports_a_global_chain_break_under_a_stream_filter(built: Built) -> None:
    position = built.positions["other_created"]  # beta's first event, inside alpha's span
    tamper_column(built.root, position, "recorded_at", 1)
    with open_store(built.root) as store:
        report = verify_store(store, "run-alpha")
    assert [(p.position, p.kind) for p in report.problems] == [(position, "chain")]
    result = invoke(*store_args(built, "verify", "alpha"))
    assert result.exit_code == 1 and f"position {position} (run-beta v1)" in result.stderr


def test_verify_broken_link_and_gap(built: Built) -> None:
    position = built.positions["evaluation"]
    tamper_column(built.root, position, "prev_hash", "f" * 64)
    with open_store(built.root) as store:
        report = verify_store(store)
    kinds = [(p.position, p.kind) for p in report.problems]
    assert kinds[0] == (position, "chain")
    assert report.first_problem is not None and "prev_hash" in report.first_problem.message


def test_verify_position_gap(built: Built) -> None:
    moved = built.positions["episode1"]
    tamper_column(built.root, moved, "position", 1000)
    with open_store(built.root) as store:
        report = verify_store(store)
    assert report.first_problem is not None
    assert (report.first_problem.position, report.first_problem.kind) == (moved + 1, "position")
    assert f"expected global position {moved}" in report.first_problem.message
    assert report.problems[-1].position == 1000
    result = invoke(*store_args(built, "verify"))
    assert result.exit_code == 1 and f"first: position {moved + 1} " in result.stderr


def test_verify_version_gap(built: Built) -> None:
    position = built.positions["published"]
    tamper_column(built.root, position, "stream_version", 99)
    with open_store(built.root) as store:
        report = verify_store(store, "run-alpha")
    kinds = {(p.position, p.kind) for p in report.problems}
    assert (position, "version") in kinds and (position, "chain") in kinds
    assert (position + 1, "version") in kinds  # the next one no longer follows either


def test_verify_missing_blob(built: Built) -> None:
    digest = built.blobs["trace1"]
    with open_store(built.root) as store:
        lose_blob(store.blobs, digest)
    result = invoke(*store_args(built, "verify"))
    assert result.exit_code == 1
    line = one_line_error(result)
    assert digest in line and f"position {built.positions['episode1']} " in line
    report = json.loads(invoke(*store_args(built, "verify", "--json")).stdout)
    assert report["first_problem"]["blob"] == digest
    assert report["first_problem"]["kind"] == "blob_missing"


def test_verify_corrupt_blob(built: Built) -> None:
    digest = built.blobs["artifact"]
    with open_store(built.root) as store:
        overwrite_blob(store.blobs, digest, b"R" + b"episode,return\n0,1\n")
    result = invoke(*store_args(built, "verify"))
    assert result.exit_code == 1
    line = one_line_error(result)
    assert digest in line and "corrupt" in line
    assert f"position {built.positions['published']} " in line


def test_verify_missing_program_names_every_reference(built: Built) -> None:
    digest = built.blobs["improved"]
    with open_store(built.root) as store:
        lose_program(store.blobs, digest)
    with open_store(built.root) as store:
        report = verify_store(store)
    assert {p.blob for p in report.problems} == {digest}
    # EvaluationStarted, SubmissionPublished, FinalSubmissionSelected all reference it.
    assert len(report.problems) == 3
    assert report.first_problem is not None
    assert report.first_problem.position == built.positions["evaluation"]
    assert [p.position for p in report.problems] == sorted(p.position for p in report.problems)


def test_verify_undecodable_payload(built: Built) -> None:
    position = built.positions["episode0"]
    tamper_column(built.root, position, "type", "NoSuchEvent")
    with open_store(built.root) as store:
        report = verify_store(store)
    kinds = [p.kind for p in report.problems if p.position == position]
    assert "decode" in kinds and "chain" in kinds


# --------------------------------------------------------------------------- store, schema


@pytest.mark.parametrize("command", [["list"], ["show", "alpha"], ["events", "alpha"], ["verify"]])
def test_missing_store_is_one_line_error(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nowhere"
    line = one_line_error(invoke("record", "--store", str(missing), *command))
    assert str(missing) in line and "record" in line and "create" in line
    assert not missing.exists()


def test_store_from_environment(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_ENV, str(built.root))
    result = invoke("record", "list", "--json")
    assert result.exit_code == 0 and len(json.loads(result.stdout)) == 2


def test_create(tmp_path: Path) -> None:
    root = tmp_path / "new"
    created = invoke("record", "--store", str(root), "create")
    assert created.exit_code == 0 and "created" in created.stdout
    assert (root / "events.db").is_file()
    again = invoke("record", "--store", str(root), "create")
    assert again.exit_code == 0 and "already exists" in again.stdout
    assert invoke("record", "--store", str(root), "verify").stdout == (
        "ok: 0 events, 0 blobs verified\n"
    )


def test_schema_check_on_repository_files(monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke("record", "schema", "--check", "--output", str(ROOT / "schemas" / "events"))
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(ROOT)
    assert invoke("record", "schema", "--check").exit_code == 0


def test_schema_write_then_drift(tmp_path: Path) -> None:
    out = tmp_path / "schemas"
    written = invoke("record", "schema", "--output", str(out))
    assert written.exit_code == 0, written.output
    assert invoke("record", "schema", "--check", "--output", str(out)).exit_code == 0
    (out / "RunFinished.json").write_text("{}\n")
    (out / "AgentStarted.json").unlink()
    line = one_line_error(invoke("record", "schema", "--check", "--output", str(out)))
    assert "RunFinished.json" in line and "AgentStarted.json" in line
    assert invoke("record", "schema", "--output", str(out)).exit_code == 0
    assert invoke("record", "schema", "--check", "--output", str(out)).exit_code == 0


def test_recorded_control_characters_do_not_reach_the_terminal(tmp_path: Path) -> None:
    hostile = "\x1b]0;PWNED\x07\x1b[2J"
    with open_store(tmp_path / "store", create=True) as store:
        w = Writer(store)
        w.append("run-esc", run_created("esc", "sha256:" + "a" * 64))
        w.append(
            "run-esc", SubmissionRejected(request_id="r1", code="invalid_request", message=hostile)
        )
    for args in (["events", "esc"], ["show", "esc"]):
        result = invoke("record", "--store", str(tmp_path / "store"), *args)
        assert result.exit_code == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def test_follow_from_past_the_end_of_a_finished_run_returns(tmp_path: Path) -> None:
    import subprocess
    import sys

    with open_store(tmp_path / "store", create=True) as store:
        w = Writer(store)
        w.append(
            "run-done", run_created("done", "sha256:" + "a" * 64), RunFinished(reason="finished")
        )
    command = [
        sys.executable,
        "-m",
        "evopolicygym.cli",
        "record",
        "--store",
        str(tmp_path / "store"),
    ]
    done = subprocess.run(
        [*command, "events", "done", "--follow", "--from-version", "5"], timeout=60
    )
    assert done.returncode == 0


def test_verify_finds_a_damaged_index_and_reads_fail_cleanly(tmp_path: Path) -> None:
    import sqlite3

    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        w = Writer(store)
        w.append("run-idx", run_created("idx", "sha256:" + "a" * 64))
        for i in range(300):
            w.append(
                "run-idx",
                SubmissionRejected(request_id=f"r{i}", code="invalid_request", message="x" * 40),
            )
    raw = sqlite3.connect(root / "events.db")
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (rootpage,) = raw.execute(
        "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND sql IS NULL"
        " AND tbl_name = 'events' ORDER BY name LIMIT 1"
    ).fetchone()
    (page_size,) = raw.execute("PRAGMA page_size").fetchone()
    raw.close()
    with open(root / "events.db", "r+b") as handle:  # bit rot in the event-id index
        handle.seek((rootpage - 1) * page_size + 8)
        handle.write(b"\xff" * 64)
    result = invoke("record", "--store", str(root), "verify")
    assert result.exit_code == 1
    assert "damaged" in result.stdout + result.stderr


def test_verify_reports_a_malformed_blob_reference(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        w = Writer(store)
        w.append(
            "run-bad",
            run_created(
                "bad", store.blobs.put_program(Program.from_files({"policy.py": POLICY_V1}))
            ),
        )
        w.append("run-bad", AgentExited(attempt=1, stdout_blob="not-a-digest"))
    result = invoke("record", "--store", str(root), "verify")
    assert result.exit_code == 1
    assert "not-a-digest" in result.stdout + result.stderr


# --------------------------------------------------------------------------- anchors


def rechain_from(root: Path, position: int) -> None:
    """Recompute every hash from ``position`` on, as a forger who edited an event would:
    the log then checks out by itself."""
    from evopolicygym.records.chain import chain_hash

    connection = sqlite3.connect(root / "events.db")
    try:
        connection.execute("DROP TRIGGER IF EXISTS events_no_update")
        rows = connection.execute(
            "SELECT position, stream_id, stream_version, event_id, type, schema_version,"
            " recorded_at, payload_hash, prev_hash FROM events WHERE position >= ?"
            " ORDER BY position",
            (position,),
        ).fetchall()
        prev = rows[0][8]
        for pos, sid, version, event_id, type_name, schema, at, payload_hash, _ in rows:
            link = chain_hash(
                prev, pos, sid, version, event_id, type_name, schema, at, payload_hash
            )
            connection.execute(
                "UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?", (prev, link, pos)
            )
            prev = link
        connection.commit()
    finally:
        connection.close()


def test_an_anchor_kept_elsewhere_catches_a_truncated_tail_and_a_rechain(built: Built) -> None:
    head = invoke(*store_args(built, "head"))
    assert head.exit_code == 0 and re.fullmatch(r"\d+:[0-9a-f]{64}\n", head.stdout)
    anchor = head.stdout.strip()
    assert json.loads(invoke(*store_args(built, "head", "--json")).stdout)["anchor"] == anchor
    assert invoke(*store_args(built, "verify", "--anchor", anchor)).exit_code == 0
    # Events after the anchor are the log going on, not a problem.
    position = int(anchor.split(":")[0])

    # A recorded_at edited, then the chain recomputed from there: verify alone passes.
    tamper_column(built.root, position - 1, "recorded_at", 1)
    rechain_from(built.root, position - 1)
    assert invoke(*store_args(built, "verify")).exit_code == 0
    rewritten = invoke(*store_args(built, "verify", "--anchor", anchor))
    assert rewritten.exit_code == 1 and "rewritten since the anchor" in one_line_error(rewritten)

    # The tail removed: the chain of what is left still checks out.
    connection = sqlite3.connect(built.root / "events.db")
    connection.execute("DROP TRIGGER IF EXISTS events_no_delete")
    connection.execute("DELETE FROM events WHERE position >= ?", (position,))
    connection.commit()
    connection.close()
    report = json.loads(invoke(*store_args(built, "verify", "--json", "--anchor", anchor)).stdout)
    assert report["ok"] is False and report["first_problem"]["kind"] == "anchor"
    assert "removed since the anchor" in report["first_problem"]["message"]


def test_a_bad_anchor_is_a_usage_error(built: Built) -> None:
    result = invoke(*store_args(built, "verify", "--anchor", "12:nothex"))
    assert result.exit_code == 2 and "POSITION:HASH" in result.stderr

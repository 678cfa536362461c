"""The Agent's workspace as a projection of a real Run log, and ``evopolicy record checkout``."""

from __future__ import annotations

import inspect
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from evopolicygym.cli import main
from evopolicygym.program import Program
from evopolicygym.records.events import (
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateValidated,
    EpisodeOutcome,
    FinalSubmissionSelected,
    RunFinished,
    SubmissionPublished,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.records.location import Store
from evopolicygym.run.workspace import (
    AGENT_FAULT_MESSAGE,
    TraceCache,
    build_feedback,
    feedback_dir_name,
    rebuild_workspace,
    sync_feedback,
)
from tests.support.workspace_run import (
    BUDGET,
    CANARY,
    CANARY_SCORE,
    CANARY_SEED,
    CANARY_TEXT,
    HELPER,
    Programs,
    RunLog,
    artifact,
    episode,
    new_store,  # noqa: F401 (the fixture store)
    program,
    recorded_run,  # noqa: F401 (the fixture run)
    run_created,
    started,
    stored_programs,  # noqa: F401 (the fixture programs)
    tree,
)

TASK_MD = "# Task\n\nBalance the pole.\n"
TASK_JSON = b'{"benchmark": "cartpole", "episode_budget": 12}\n'


def add_private_tail(log: RunLog, final: Program) -> None:
    """Validation, selection and assessment: held-out evidence carrying the canary."""
    outcomes = [
        EpisodeOutcome(index=i, status="ok", total_reward=CANARY_SCORE, steps=1) for i in range(2)
    ]
    log.append(
        ValidationStarted(candidates=[1, 3], split="validation", episodes=2, seed=CANARY_SEED),
        CandidateValidated(submission_id=1, score=CANARY_SCORE, failures=0, episodes=outcomes),
        ValidationFailed(error=CANARY_TEXT),
        FinalSubmissionSelected(
            submission_id=3, program_digest=final.digest, score=CANARY_SCORE, reason=CANARY_TEXT
        ),
        AssessmentStarted(submission_id=3, split="assessment", episodes=2, seed=CANARY_SEED),
        AssessmentCompleted(
            submission_id=3,
            score=CANARY_SCORE,
            failures=0,
            episodes=outcomes,
            content={"canary": CANARY_TEXT},
        ),
        AssessmentFailed(error=CANARY_TEXT),
        RunFinished(reason="finished", final_submission_id=3, assessment_score=CANARY_SCORE),
    )


def modes(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): stat.S_IMODE(p.lstat().st_mode)
        for p in [root, *root.rglob("*")]
    }


# --------------------------------------------------------------------------- build_feedback


def test_feedback_json_fields_and_values(run: RunLog, programs: Programs, store: Store) -> None:
    files = build_feedback(run.read(), store.blobs, retention_bytes=10_000)
    assert set(files) == {
        "latest.json",
        "submission-0001/feedback.json",
        "submission-0001/artifacts/summary.txt",
        "submission-0001/artifacts/trace.jsonl",
        "submission-0002/feedback.json",
        "submission-0003/feedback.json",
        "submission-0003/artifacts/trace.jsonl",
    }
    raw = files["submission-0001/feedback.json"]
    first = json.loads(raw)
    # The canonical form, byte for byte, with non-ASCII kept as UTF-8.
    assert raw == (json.dumps(first, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    assert "héllo".encode() in raw
    assert first == {
        "submission_id": 1,
        "program_digest": programs.first.digest,
        "parent_program_digest": programs.initial.digest,
        "indices": [0, 1],
        "status": "published",
        "budget_reserved": 2,
        "budget_used": 2,
        "budget_left": 10,
        "score": 20.0,
        "failures": 1,
        "content": {"mean_steps": 20, "note": "héllo"},
        "episodes": [
            {
                "index": 0,
                "status": "ok",
                "total_reward": 40.0,
                "steps": 40,
                "failure": None,
                "output_tail": "episode 0 done\n",
            },
            {
                "index": 1,
                "status": "error",
                "total_reward": 0.0,
                "steps": 0,
                "failure": "policy raised ValueError",
                "output_tail": "episode 1 done\n",
            },
        ],
        "artifacts": [
            {
                "name": "summary.txt",
                "media_type": "application/octet-stream",
                "retention": "permanent",
                "size": 18,
                "path": "submission-0001/artifacts/summary.txt",
                "pruned": False,
            },
            {
                "name": "trace.jsonl",
                "media_type": "application/octet-stream",
                "retention": "bulk",
                "size": 300,
                "path": "submission-0001/artifacts/trace.jsonl",
                "pruned": False,
            },
        ],
        "error": None,
    }
    assert files["submission-0001/artifacts/summary.txt"] == b"permanent summary\n"
    assert files["submission-0001/artifacts/trace.jsonl"] == b"x" * 300

    failed = json.loads(files["submission-0002/feedback.json"])
    assert failed == {
        "submission_id": 2,
        "program_digest": programs.second.digest,
        "parent_program_digest": programs.first.digest,
        "indices": [2, 3, 4],
        "status": "failed",
        "budget_reserved": 3,
        "budget_used": 5,
        "budget_left": BUDGET - 5,
        "score": None,
        "failures": None,
        "content": None,
        "episodes": [
            {
                "index": 2,
                "status": "ok",
                "total_reward": 10.0,
                "steps": 10,
                "failure": None,
                "output_tail": "episode 2 done\n",
            }
        ],
        "artifacts": [],
        "error": AGENT_FAULT_MESSAGE,  # the recorded detail ("worker lost") stays Host-side
    }


def test_latest_is_the_newest_submission(run: RunLog, programs: Programs, store: Store) -> None:
    files = build_feedback(run.read(), store.blobs, retention_bytes=10_000)
    assert files["latest.json"] == files["submission-0003/feedback.json"]
    assert json.loads(files["latest.json"])["submission_id"] == 3

    # A Submission still being evaluated has no feedback yet: latest stays on the last one.
    run.append(started(4, programs.first, programs.second, [0], used=7), episode(4, 0, 5.0))
    files = build_feedback(run.read(), store.blobs, retention_bytes=10_000)
    assert "submission-0004/feedback.json" not in files
    assert files["latest.json"] == files["submission-0003/feedback.json"]

    # Before any outcome there is no latest.json at all.
    assert build_feedback(run.read()[:4], store.blobs, retention_bytes=10_000) == {}
    assert feedback_dir_name(1) == "submission-0001"
    assert feedback_dir_name(12) == "submission-0012"


def test_retention_prunes_older_bulk_artifacts(run: RunLog, store: Store) -> None:
    # The newest bulk artifact (1000 bytes) is kept though it alone exceeds the limit;
    # the older bulk one is then pruned; the permanent one is kept regardless.
    files = build_feedback(run.read(), store.blobs, retention_bytes=500)
    assert files["submission-0003/artifacts/trace.jsonl"] == b"y" * 1000
    assert "submission-0001/artifacts/trace.jsonl" not in files
    assert files["submission-0001/artifacts/summary.txt"] == b"permanent summary\n"
    listed = {a["name"]: a for a in json.loads(files["submission-0001/feedback.json"])["artifacts"]}
    assert listed["trace.jsonl"]["pruned"] is True and listed["trace.jsonl"]["path"] is None
    assert listed["trace.jsonl"]["size"] == 300
    assert listed["summary.txt"]["pruned"] is False
    newest = json.loads(files["latest.json"])["artifacts"]
    assert newest[0]["pruned"] is False
    assert newest[0]["path"] == "submission-0003/artifacts/trace.jsonl"

    # The running total counts the newest Submission's bulk bytes: 1000 + 300 fits in 1300.
    files = build_feedback(run.read(), store.blobs, retention_bytes=1300)
    assert files["submission-0001/artifacts/trace.jsonl"] == b"x" * 300
    files = build_feedback(run.read(), store.blobs, retention_bytes=1299)
    assert "submission-0001/artifacts/trace.jsonl" not in files


def test_unsafe_and_duplicate_artifact_names_are_listed_not_written(
    store: Store, programs: Programs
) -> None:
    log = RunLog(store)
    log.append(
        run_created(programs.initial.digest),
        started(1, programs.first, programs.initial, [0], used=1),
        SubmissionPublished(
            submission_id=1,
            program_digest=programs.first.digest,
            score=1.0,
            failures=0,
            artifacts=[
                artifact(store.blobs, "../escape", b"no"),
                artifact(store.blobs, "a.txt", b"first"),
                artifact(store.blobs, "a.txt", b"second"),
            ],
            budget_used=1,
            budget_left=11,
        ),
    )
    files = build_feedback(log.read(), store.blobs, retention_bytes=0)
    assert {k: v for k, v in files.items() if "/artifacts/" in k} == {
        "submission-0001/artifacts/a.txt": b"first"
    }
    listed = json.loads(files["latest.json"])["artifacts"]
    assert [(a["name"], a["path"]) for a in listed] == [
        ("../escape", None),
        ("a.txt", "submission-0001/artifacts/a.txt"),
        ("a.txt", None),
    ]


def test_a_runs_cache_between_publications_changes_no_byte(
    run: RunLog, store: Store, tmp_path: Path
) -> None:
    """The Host keeps one cache per Run and builds after every Submission: at every point
    of the log, and as retention prunes what an earlier build wrote, the cached build is the
    fresh one, and syncing it leaves the same tree as syncing a fresh build into a new
    workspace."""
    events = run.read()
    cache = TraceCache()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    built = 0
    for end in range(len(events) + 1):
        for retention in (10_000, 500, 0, 1300):
            fresh = build_feedback(events[:end], store.blobs, retention)
            cached = build_feedback(events[:end], store.blobs, retention, None, cache)
            assert cached == fresh
            assert list(cached) == list(fresh)
            sync_feedback(workspace, cached)
            other = tmp_path / f"fresh-{end}-{retention}"
            other.mkdir()
            sync_feedback(other, fresh)
            assert tree(workspace / "feedback") == tree(other / "feedback")
            assert modes(workspace / "feedback") == modes(other / "feedback")
            built += bool(fresh)
    assert built > 4  # the log concludes Submissions along the way


def test_build_is_deterministic(run: RunLog, store: Store, tmp_path: Path) -> None:
    first = build_feedback(run.read(), store.blobs, retention_bytes=500)
    second = build_feedback(run.read(), store.blobs, retention_bytes=500)
    assert first == second
    assert list(first) == list(second)

    trees = []
    for name in ("one", "two"):
        workspace = tmp_path / name
        workspace.mkdir()
        sync_feedback(workspace, build_feedback(run.read(), store.blobs, retention_bytes=500))
        trees.append((tree(workspace / "feedback"), modes(workspace / "feedback")))
    assert trees[0] == trees[1]
    files = {k: v for k, v in trees[0][0].items() if v is not None}
    assert files == first


# --------------------------------------------------------------------------- sync_feedback


def test_sync_replaces_removes_and_sets_read_only(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sync_feedback(
        workspace,
        {
            "latest.json": b"{}\n",
            "submission-0001/feedback.json": b"old\n",
            "submission-0001/artifacts/a.bin": b"a",
            "submission-0002/feedback.json": b"two\n",
        },
    )
    root = workspace / "feedback"
    assert modes(root) == {
        ".": 0o555,
        "latest.json": 0o444,
        "submission-0001": 0o555,
        "submission-0001/artifacts": 0o555,
        "submission-0001/artifacts/a.bin": 0o444,
        "submission-0001/feedback.json": 0o444,
        "submission-0002": 0o555,
        "submission-0002/feedback.json": 0o444,
    }
    unchanged = (root / "submission-0002" / "feedback.json").stat().st_ino

    wanted = {"latest.json": b"{}\n", "submission-0001/feedback.json": b"new\n"}
    wanted["submission-0002/feedback.json"] = b"two\n"
    sync_feedback(workspace, wanted)
    assert {k: v for k, v in tree(root).items() if v is not None} == wanted
    # The emptied artifacts/ directory went with its file; an unchanged file is not rewritten.
    assert not (root / "submission-0001" / "artifacts").exists()
    assert (root / "submission-0002" / "feedback.json").stat().st_ino == unchanged
    assert all(
        mode == (0o555 if (root / rel).is_dir() else 0o444) for rel, mode in modes(root).items()
    )

    # Idempotent: a second sync of the same files changes nothing.
    before = (tree(root), modes(root))
    sync_feedback(workspace, wanted)
    assert (tree(root), modes(root)) == before

    sync_feedback(workspace, {})
    assert tree(root) == {} and modes(root) == {".": 0o555}


def test_sync_does_not_follow_planted_symlinks(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace.mkdir()
    sync_feedback(workspace, {"latest.json": b"1\n"})
    root = workspace / "feedback"
    os.chmod(root, 0o755)
    os.symlink(outside, root / "submission-0001")
    (outside / "keep.txt").write_bytes(b"mine")
    sync_feedback(workspace, {"submission-0001/feedback.json": b"x\n"})
    assert (root / "submission-0001").is_dir() and not (root / "submission-0001").is_symlink()
    assert tree(outside) == {"keep.txt": b"mine"}
    with pytest.raises(ValueError):
        sync_feedback(workspace, {"../escape": b"x"})


# --------------------------------------------------------------------------- the layout


def test_rebuild_lays_out_and_keeps_an_existing_program(
    tmp_path: Path, programs: Programs, store: Store
) -> None:
    workspace = tmp_path / "ws"
    rebuild_workspace(workspace, [], store.blobs, 500, programs.second, TASK_MD, TASK_JSON)
    assert sorted(p.name for p in workspace.iterdir()) == [
        "TASK.md",
        "analysis",
        "feedback",
        "program",
        "task.json",
    ]
    assert Program.from_directory(workspace / "program").digest == programs.second.digest
    assert (workspace / "TASK.md").read_text() == TASK_MD
    assert (workspace / "task.json").read_bytes() == TASK_JSON
    assert list((workspace / "analysis").iterdir()) == []
    assert list((workspace / "feedback").iterdir()) == []
    assert stat.S_IMODE((workspace / "feedback").stat().st_mode) == 0o555

    # The Agent's unsubmitted edits and notes survive a second rebuild (a resume).
    (workspace / "program" / "policy.py").write_text("# edited\n")
    (workspace / "analysis" / "notes.md").write_text("try a PID\n")
    rebuild_workspace(workspace, [], store.blobs, 500, programs.initial, "# New task\n", b"{}")
    assert (workspace / "program" / "policy.py").read_text() == "# edited\n"
    assert (workspace / "analysis" / "notes.md").read_text() == "try a PID\n"
    assert (workspace / "TASK.md").read_text() == "# New task\n"
    assert (workspace / "task.json").read_bytes() == b"{}"
    assert not [p for p in workspace.iterdir() if p.name.startswith(".tmp-")]


def test_rebuild_uses_the_newest_submitted_program(
    tmp_path: Path, run: RunLog, programs: Programs, store: Store
) -> None:
    events = run.read()
    workspace = tmp_path / "ws"
    rebuild_workspace(workspace, events, store.blobs, 500, programs.initial, TASK_MD, TASK_JSON)
    assert Program.from_directory(workspace / "program").digest == programs.second.digest
    files = build_feedback(events, store.blobs, 500)
    assert {k: v for k, v in tree(workspace / "feedback").items() if v is not None} == files

    # Before any Submission, a rebuild starts from the initial Program.
    fresh = tmp_path / "fresh"
    rebuild_workspace(fresh, events[:2], store.blobs, 500, programs.initial, TASK_MD, TASK_JSON)
    assert Program.from_directory(fresh / "program").digest == programs.initial.digest
    assert tree(fresh / "feedback") == {}


def test_workspace_carries_no_private_or_held_out_evidence(
    tmp_path: Path, run: RunLog, programs: Programs, store: Store
) -> None:
    add_private_tail(run, programs.second)
    events = run.read()
    # The canary is really in the log and the blobs, so its absence below means something.
    assert any(
        CANARY.encode() in envelope.payload for envelope in store.events.read_stream(run.stream, 0)
    )
    workspace = tmp_path / "ws"
    rebuild_workspace(workspace, events, store.blobs, 10_000, programs.initial, TASK_MD, TASK_JSON)
    sync_feedback(workspace, build_feedback(events, store.blobs, 10_000))
    contents = {k: v for k, v in tree(workspace).items() if v is not None}
    assert "feedback/latest.json" in contents and "program/policy.py" in contents
    needles = {
        CANARY,
        repr(CANARY_SCORE),
        CANARY_TEXT,
        "seed",
        "scenario",
        "duration",
        "trace_blob",
    }
    for rel, data in contents.items():
        for needle in needles:
            assert needle.encode() not in data, (rel, needle)
    assert not any(CANARY in rel for rel in contents)


# --------------------------------------------------------------------------- checkout


def invoke(*args: str) -> Result:
    # click < 8.2 mixes stderr into stdout unless told not to; 8.2+ always keeps them apart.
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    result = CliRunner(**options).invoke(main, list(args), prog_name="evopolicy")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def checkout(store: Store, *args: str) -> Result:
    return invoke("record", "--store", str(store.path), "checkout", *args)


def error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_checkout_by_id_initial_and_final(
    tmp_path: Path, run: RunLog, programs: Programs, store: Store
) -> None:
    result = checkout(store, "alpha", "3", str(tmp_path / "three"))
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 1
    assert programs.second.digest in result.stdout and "2 files" in result.stdout
    assert Program.from_directory(tmp_path / "three").digest == programs.second.digest
    assert (tmp_path / "three" / "lib" / "helper.py").read_text() == HELPER

    (tmp_path / "empty").mkdir()
    result = checkout(store, "run-alpha", "initial", str(tmp_path / "empty"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "run_id": "alpha",
        "submission": "initial",
        "program_digest": programs.initial.digest,
        "files": 1,
        "directory": str(tmp_path / "empty"),
    }
    assert Program.from_directory(tmp_path / "empty").digest == programs.initial.digest

    # A failed evaluation still names its Program.
    result = checkout(store, "alpha", "2", str(tmp_path / "two"), "--json")
    assert json.loads(result.stdout)["program_digest"] == programs.second.digest

    assert "no final submission" in error_line(
        checkout(store, "alpha", "final", str(tmp_path / "f"))
    )
    assert not (tmp_path / "f").exists()
    run.append(
        FinalSubmissionSelected(submission_id=1, program_digest=programs.first.digest, score=20.0)
    )
    result = checkout(store, "alpha", "final", str(tmp_path / "final"), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["submission"] == 1 and report["program_digest"] == programs.first.digest
    assert Program.from_directory(tmp_path / "final").digest == programs.first.digest


def test_checkout_errors(tmp_path: Path, run: RunLog, programs: Programs, store: Store) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep\n")
    assert "not empty" in error_line(checkout(store, "alpha", "1", str(busy)))
    assert sorted(p.name for p in busy.iterdir()) == ["mine.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert "not a directory" in error_line(checkout(store, "alpha", "1", str(afile)))

    line = error_line(checkout(store, "alpha", "9", str(tmp_path / "nine")))
    assert "no submission 9" in line
    assert "no run 'nope'" in error_line(checkout(store, "nope", "1", str(tmp_path / "n")))
    assert not (tmp_path / "nine").exists() and not (tmp_path / "n").exists()

    bad = checkout(store, "alpha", "latest", str(tmp_path / "x"))
    assert bad.exit_code == 2 and bad.stderr.startswith("error: SUBMISSION must be")

    # A Program the log names but the store lacks.
    missing = program("def make_policy(context):\n    return None\n")
    run.append(started(4, missing, programs.second, [0], used=7))
    line = error_line(checkout(store, "alpha", "4", str(tmp_path / "four")))
    assert missing.digest in line and "not in the store" in line
    assert not (tmp_path / "four").exists()

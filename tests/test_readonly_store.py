"""A store on read-only media: everything that only reads works (list, show, head, verify,
replay, checkout, query, export); what must write says the store is read-only, in one line.

The media is real: the store directory bind-mounted read-only in a mount namespace of the
command's own (``unshare``), so every write fails with EROFS as on a read-only disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Real read-only mounts (~35 s): the end-to-end tier (`uv run pytest -m slow`).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("unshare") is None, reason="util-linux's unshare is not installed"
    ),
]

CLI = [sys.executable, "-m", "evopolicygym.cli"]
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def _on_read_only(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``evopolicy ARGS`` with ``store`` read-only to it (and only to it)."""
    return subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            READ_ONLY,
            str(store),
            *CLI,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one finished Run, never queried (so it has no read models yet)."""
    store = tmp_path_factory.mktemp("ro") / "store"
    made = subprocess.run(
        [*CLI, "quickstart", "--store", str(store), "--budget", "8"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr
    listed = subprocess.run(
        [*CLI, "record", "--store", str(store), "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (read_models := store / "read-models.duckdb").unlink(missing_ok=True)
    assert not read_models.exists()
    return store, json.loads(listed.stdout)[0]["run_id"]


def _writes_refused(store: Path) -> None:
    probe = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            READ_ONLY,
            str(store),
            "touch",
            str(store / "x"),
        ],
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr


def test_reading_commands_work_on_a_read_only_store(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    store, run_id = recorded
    _writes_refused(store)
    before = {path: path.stat().st_mtime_ns for path in store.rglob("*")}

    listed = _on_read_only(store, "record", "--store", str(store), "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["run_id"], r["status"]) for r in json.loads(listed.stdout)] == [(run_id, "finished")]

    shown = _on_read_only(store, "record", "--store", str(store), "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["terminal_reason"] == "finished"

    assert _on_read_only(store, "record", "--store", str(store), "verify").stdout.startswith("ok: ")
    head = _on_read_only(store, "record", "--store", str(store), "head")
    assert head.returncode == 0 and head.stdout.strip().split(":")[0].isdigit()

    replayed = _on_read_only(store, "record", "replay", run_id, "--store", str(store))
    assert replayed.returncode == 0 and f"ok: run {run_id}" in replayed.stdout

    program = tmp_path / "final"
    checked = _on_read_only(
        store, "record", "--store", str(store), "checkout", run_id, "final", str(program)
    )
    assert checked.returncode == 0, checked.stderr
    assert (program / "policy.py").exists()

    # No read models on disk and none can be written: built in memory for the query.
    queried = _on_read_only(
        store, "query", "--store", str(store), "--json", "SELECT run_id, status FROM runs"
    )
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout) == [{"run_id": run_id, "status": "finished"}]

    out = tmp_path / "dataset"
    exported = _on_read_only(
        store, "export", "--store", str(store), "--format", "sft", "-o", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    import datasets

    rows = datasets.load_dataset(str(out), "sft", split="train")
    assert set(rows["run_id"]) == {run_id}

    assert {path: path.stat().st_mtime_ns for path in store.rglob("*")} == before
    assert not (store / "read-models.duckdb").exists()


def test_existing_read_models_of_a_read_only_store_are_queried(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    store, _ = recorded
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    made = subprocess.run(
        [*CLI, "query", "--store", str(copy), "SELECT 1"], capture_output=True, text=True
    )
    assert made.returncode == 0 and (copy / "read-models.duckdb").exists()
    queried = _on_read_only(
        copy, "query", "--store", str(copy), "--json", "SELECT count(*) AS n FROM submissions"
    )
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout)[0]["n"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ("resume", "{run}", "--store", "{store}"),
        ("run", "--benchmark", "cartpole", "--budget", "4", "--store", "{store}"),
        ("quickstart", "--store", "{store}"),
    ],
    ids=["resume", "run", "quickstart"],
)
def test_writing_commands_say_the_store_is_read_only(
    recorded: tuple[Path, str], args: tuple[str, ...]
) -> None:
    store, run_id = recorded
    done = _on_read_only(store, *(a.format(run=run_id, store=store) for a in args))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "read-only" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_what_a_dead_writer_left_in_the_write_ahead_logs_is_read_or_refused(tmp_path: Path) -> None:
    """A Host killed before SQLite checkpointed leaves its last events and blobs only in
    events.db-wal and pack.db-wal. On read-only media they are read through the logs, or the
    command refuses, saying why; never a store that silently lacks them."""
    store = tmp_path / "store"
    script = (
        "import os, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from tests.support.runlogs import Planned, SynthRun, policy_source, write_run\n"
        "from evopolicygym.records.location import open_store\n"
        "store = open_store(sys.argv[1], create=True)\n"
        "write_run(store, SynthRun(run_id='walrun', "
        "submissions=[Planned({'policy.py': policy_source(0.5)}, [0, 1], [1.0, 2.0])], "
        "candidates=[1]))\n"
        "os._exit(0)\n"  # no close, no checkpoint
    )
    made = subprocess.run(
        [sys.executable, "-c", script, str(store), str(Path(__file__).resolve().parents[1])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    for wal in (store / "events.db-wal", store / "blobs" / "pack.db-wal"):
        assert wal.exists() and wal.stat().st_size > 0, wal
    _writes_refused(store)
    listed = _on_read_only(store, "record", "--store", str(store), "list", "--json")
    verified = _on_read_only(store, "record", "--store", str(store), "verify")
    for done in (listed, verified):
        if done.returncode != 0:
            assert (
                "write-ahead log" in done.stderr and len(done.stderr.strip().splitlines()) == 1
            ), done.stderr
    if listed.returncode == 0:
        assert [r["run_id"] for r in json.loads(listed.stdout)] == ["walrun"]
        assert verified.returncode == 0, verified.stdout + verified.stderr

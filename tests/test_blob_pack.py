"""The blob pack of a store directory: small blobs and program mappings as rows of
``blobs/pack.db``, larger blobs as files; stores written before the pack (every blob a file)
open, verify, replay and export as before, and take packed blobs beside their files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets
import pytest

from evopolicygym.program import Program
from evopolicygym.records.blobs import PACK_MAX_BYTES, FileBlobStore
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.records.verify import verify_store
from evopolicygym.run.replay import replay_run
from evopolicygym_exporters import ExportOptions, export
from tests.support.runlogs import Planned, SynthRun, policy_source, write_run

pytestmark = pytest.mark.timeout(240)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_small_blobs_and_programs_go_to_the_pack_large_ones_to_files(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        small = store.blobs.put(b"a small blob " * 10)
        large_bytes = os.urandom(PACK_MAX_BYTES + 1)  # does not compress: stays over the limit
        large = store.blobs.put(large_bytes)
        program = Program.from_files(
            {"policy.py": policy_source(0.5), "util/helpers.py": "X = 1\n"}
        )
        store.blobs.put_program(program)
        hexdigest = large.removeprefix("sha256:")
        assert [f for f in _files(store.blobs.root) if not f.startswith("pack.db-")] == [
            "pack.db",
            f"sha256/{hexdigest[:2]}/{hexdigest[2:]}",
        ]
        assert (
            store.blobs.get(small) == b"a small blob " * 10
            and store.blobs.get(large) == large_bytes
        )
        assert (
            store.blobs.has(small)
            and store.blobs.has(large)
            and store.blobs.has_program(program.digest)
        )
        assert store.blobs.size(small) == 130 and store.blobs.size(large) == len(large_bytes)
        assert store.blobs.get_program(program.digest) == program
        every = list(store.blobs.digests())
        assert (
            every == sorted(every)
            and {small, large} <= set(every)
            and len(every) == len(set(every))
        )
        assert list(store.blobs.program_digests()) == [program.digest]
        assert store.blobs.integrity_problems() == []
    # Reopened (and by a bare FileBlobStore over the directory, as older readers do): the same.
    for blobs in (
        FileBlobStore(tmp_path / "store" / "blobs"),
        open_store(tmp_path / "store").blobs,
    ):
        assert (
            blobs.get(small) == b"a small blob " * 10
            and blobs.get_program(program.digest) == program
        )
        blobs.close()


def test_a_damaged_pack_is_an_integrity_problem(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        for i in range(200):
            store.blobs.put(f"blob {i} ".encode() * 40)
        path = store.blobs.pack_path
    size = path.stat().st_size
    with open(path, "r+b") as handle:  # past the header: scribble over a page of rows
        handle.seek(size // 2)
        handle.write(b"\xff" * 4096)
    with open_store(tmp_path / "store") as store:
        problems = store.blobs.integrity_problems()
        assert problems and all("blob pack" in p for p in problems)


@pytest.mark.parametrize("damage", ["header", "garbage", "empty", "no programs table"])
def test_record_verify_reports_a_damaged_pack_and_changes_nothing(
    tmp_path: Path, damage: str
) -> None:
    """``record verify`` on a store whose pack is damaged says so, in its report, with exit
    status 1, never a traceback; and reading the store writes nothing into it."""
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        write_run(store, _run("alpha"))
        path = store.blobs.pack_path
    if damage == "header":
        with open(path, "r+b") as handle:
            handle.write(b"\x00" * 100)
    elif damage == "garbage":
        path.write_bytes(os.urandom(path.stat().st_size))
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        conn = sqlite3.connect(path)
        conn.execute("DROP TABLE programs")
        conn.commit()
        conn.close()
    before = {f: (root / f).read_bytes() for f in _files(root) if not f.endswith("-shm")}
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym.cli", "record", "verify", "--store", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    said = done.stdout + done.stderr
    assert "blob pack" in said or "not in the store" in said or "missing" in said, said
    after = {f: (root / f).read_bytes() for f in _files(root) if not f.endswith("-shm")}
    assert after == before


def test_a_read_only_store_sees_blobs_its_writer_left_in_the_write_ahead_log(
    tmp_path: Path,
) -> None:
    """A Host that died without closing leaves its last packed blobs in pack.db-wal; opened
    read-only, the store still reads them (an immutable open would not see them)."""
    root = tmp_path / "100%41 store"  # a name a file: URI must escape
    script = (
        "import os, sys\n"
        "from evopolicygym.records.location import open_store\n"
        "store = open_store(sys.argv[1], create=True)\n"
        "print(store.blobs.put(b'left in the log ' * 20), flush=True)\n"
        "os._exit(0)\n"  # no close: no checkpoint
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    digest = done.stdout.strip()
    wal = root / "blobs" / "pack.db-wal"
    assert wal.exists() and wal.stat().st_size > 0
    blobs = FileBlobStore(root / "blobs", pack=True, read_only=True)
    try:
        assert blobs.has(digest)
        assert blobs.get(digest) == b"left in the log " * 20
        assert list(blobs.digests()) == [digest]
    finally:
        blobs.close()


def _run(run_id: str, gain: float = 0.5) -> SynthRun:
    return SynthRun(
        run_id=run_id,
        submissions=[
            Planned({"policy.py": policy_source(gain)}, [0, 1, 2], [1.0, 2.0, 3.0]),
            Planned({"policy.py": policy_source(gain + 0.2)}, [0, 1, 2], [4.0, 5.0, 6.0]),
        ],
        candidates=[2],
    )


def _export(
    store: Store, out: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> list[dict[str, Any]]:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    export(store, ["sft"], out, ExportOptions())
    loaded = datasets.load_dataset(str(out), "sft")
    rows = [row for split in sorted(loaded) for row in loaded[split]]
    return rows


def test_a_store_written_before_the_pack_opens_verifies_replays_and_exports_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "old"
    with open_store(root, create=True) as store:
        # Every blob and program mapping a file of its own, as stores were written before.
        store.blobs.close()
        store.blobs = FileBlobStore(root / "blobs")
        write_run(store, _run("alpha"))
    assert not (root / "blobs" / "pack.db").exists()
    with open_store(root) as store:
        report = verify_store(store)
        assert report.ok and report.blobs > 0, report.problems
        replay = replay_run(store, "alpha")  # (a synthetic Run: only its blobs are checked here)
        assert [p for p in replay.problems if p.blob is not None or "blob" in p.kind] == []
        before = _export(store, tmp_path / "out-old", monkeypatch, tmp_path)
        # New Runs in the same store go to the pack, beside the files.
        write_run(store, _run("beta", 0.6))
    assert (root / "blobs" / "pack.db").exists()
    with open_store(root) as store:
        report = verify_store(store)
        assert report.ok, report.problems
        assert verify_store(store, run_stream_id("beta")).ok
        assert {
            r["run_id"] for r in _export(store, tmp_path / "out-both", monkeypatch, tmp_path)
        } == {"alpha", "beta"}
    # The same Run written with the pack exports the same rows.
    with open_store(tmp_path / "new", create=True) as store:
        write_run(store, _run("alpha"))
        assert verify_store(store).ok
        after = _export(store, tmp_path / "out-new", monkeypatch, tmp_path)
    assert _without_times(after) == _without_times(before)


def _without_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    times = {"recorded_at", "created_at", "finished_at", "started_at", "exported_at"}
    return [{k: v for k, v in row.items() if k not in times} for row in rows]

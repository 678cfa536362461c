"""FileBlobStore, what only the directory store has: its layout and modes, files reaching
their names whole (crashes, concurrent processes), sizes read from a file's header; and the
codec (``blobcodec``): compressed where it pays, errors that pickle. What every backend does
is the contract suite, tests/test_blob_contract.py."""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from evopolicygym.program import Program
from evopolicygym.records.blobcodec import MAX_BLOB_BYTES, BlobCorrupt, BlobMissing, encode
from evopolicygym.records.blobs import FileBlobStore

MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
COMPRESSIBLE = b"".join(b"step %08d reward %d\n" % (i, i % 7) for i in range(60_000))[:MiB]
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def overwrite(path: Path, data: bytes) -> None:
    """Blobs are stored read-only; a test corrupting one has to lift that first."""
    os.chmod(path, 0o600)
    path.write_bytes(data)


def plant(store: FileBlobStore, digest: str, stored: bytes) -> None:
    path = store.path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(stored)


def run_python(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
def store(tmp_path: Path) -> FileBlobStore:
    """Blob files, no pack: every blob a file of its own."""
    return FileBlobStore(tmp_path / "blobs")


# -- layout ----------------------------------------------------------------------------------


def test_empty_blob_is_its_marker_byte(store: FileBlobStore) -> None:
    assert store.path(store.put(b"")).read_bytes() == b"R"


def test_layout_and_modes(store: FileBlobStore) -> None:
    digest = store.put(b"hello")
    hexdigest = digest.removeprefix("sha256:")
    path = store.root / "sha256" / hexdigest[:2] / hexdigest[2:]
    assert store.path(digest) == path
    assert path.is_file()
    for directory in (store.root, store.root / "sha256", path.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o400


def test_dedup_creates_no_new_file(store: FileBlobStore) -> None:
    first = store.put(COMPRESSIBLE)
    before = all_files(store.root)
    inode = store.path(first).stat().st_ino
    assert store.put(COMPRESSIBLE) == first
    assert store.put(bytearray(COMPRESSIBLE)) == first
    assert all_files(store.root) == before
    assert store.path(first).stat().st_ino == inode
    assert list(store.digests()) == [first]


def test_put_program_twice_writes_no_file(store: FileBlobStore) -> None:
    program = Program.from_files({"policy.py": b"x = 1\n", "lib/a.bin": bytes(range(256))})
    store.put_program(program)
    before = all_files(store.root)
    store.put_program(program)
    assert all_files(store.root) == before
    assert len(all_files(store.root / "sha256")) == 3  # two files and the tree


def test_a_file_holds_the_codecs_encoding(store: FileBlobStore) -> None:
    for data in (COMPRESSIBLE, random.Random(1).randbytes(5000), b"tiny"):
        assert store.path(store.put(data)).read_bytes() == encode(data)


# -- the codec: compression --------------------------------------------------------------------


def test_compressible_data_is_compressed() -> None:
    assert len(COMPRESSIBLE) == MiB
    stored = encode(COMPRESSIBLE)
    assert stored[:1] == b"Z"
    assert stored[1:5] == ZSTD_MAGIC
    assert len(stored) < MiB // 10


def test_random_data_is_stored_raw() -> None:
    data = random.Random(1).randbytes(MiB)
    assert encode(data) == b"R" + data


def test_small_data_is_stored_raw_even_if_compressible() -> None:
    assert encode(b"a" * 255) == b"R" + b"a" * 255
    assert encode(b"a" * 256)[:1] == b"Z"


def test_marginal_gain_is_stored_raw() -> None:
    # Random bytes with a short repeated tail: zstd saves a little, but less than 10%.
    rng = random.Random(2)
    data = rng.randbytes(4000) + b"\x00" * 200
    frame = zstandard.ZstdCompressor(level=3).compress(data)
    assert len(frame) < len(data) and 10 * len(frame) > 9 * len(data)
    assert encode(data)[:1] == b"R"


# -- sizes from a file's header ----------------------------------------------------------------


def zstd_frame_claiming(size: int) -> bytes:
    # Single-segment frame with an 8-byte content size field, then one empty last raw block.
    return ZSTD_MAGIC + b"\xe0" + size.to_bytes(8, "little") + b"\x01\x00\x00"


def test_size_of_an_unknown_marker_is_corrupt(store: FileBlobStore) -> None:
    raw = store.put(b"some raw bytes")
    overwrite(store.path(raw), b"X" + b"some raw bytes")
    with pytest.raises(BlobCorrupt, match="marker"):
        store.size(raw)
    overwrite(store.path(raw), b"")
    with pytest.raises(BlobCorrupt, match="empty"):
        store.size(raw)


@pytest.mark.parametrize("claimed", [MAX_BLOB_BYTES + 1, 1 << 40, 1 << 63])
def test_size_of_a_huge_declared_frame_is_refused_without_allocating(
    store: FileBlobStore, claimed: int
) -> None:
    digest = sha(b"pretend")
    plant(store, digest, b"Z" + zstd_frame_claiming(claimed))
    tracemalloc.start()
    try:
        with pytest.raises(BlobCorrupt, match="declares"):
            store.size(digest)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB


def test_size_is_the_frames_declared_size_content_unchecked(store: FileBlobStore) -> None:
    data = b"0123456789" * 100
    frame = bytearray(zstandard.ZstdCompressor(level=3).compress(data))
    # Descriptor 0x60: single segment, 2-byte content size (stored minus 256) right after it.
    assert frame[4] == 0x60
    frame[5:7] = (500 - 256).to_bytes(2, "little")
    digest = sha(data)
    plant(store, digest, b"Z" + bytes(frame))
    assert store.size(digest) == 500
    with pytest.raises(BlobCorrupt):
        store.get(digest)


def test_an_oversized_file_is_corrupt_before_it_is_read(
    store: FileBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evopolicygym.records import blobcodec

    digest = store.put(random.Random(7).randbytes(3000))
    monkeypatch.setattr(blobcodec, "MAX_BLOB_BYTES", 1000)
    with pytest.raises(BlobCorrupt, match="more than any blob"):
        store.get(digest)


def test_invalid_digests_have_no_path_and_make_no_directory(store: FileBlobStore) -> None:
    for bad in ("sha256:../../etc", "sha256:" + "A" * 64, "", "a" * 64):
        with pytest.raises(ValueError, match="not a digest"):
            store.path(bad)
        with pytest.raises(ValueError, match="not a digest"):
            store.get(bad)
    assert not store.root.exists()


def test_errors_pickle_and_read_in_one_line() -> None:
    digest = sha(b"x")
    for error in (
        BlobMissing(digest),
        BlobCorrupt(digest, "bad\nthing"),
        BlobMissing(digest, "program"),
    ):
        clone = pickle.loads(pickle.dumps(error))
        assert type(clone) is type(error)
        assert str(clone) == str(error)
        assert clone.digest == digest
        assert "\n" not in str(error)


# -- atomicity -------------------------------------------------------------------------------


def test_leftover_temp_file_is_ignored(store: FileBlobStore) -> None:
    data = b"content that a crashed writer was halfway through " * 20
    digest = sha(data)
    fanout = store.path(digest).parent
    fanout.mkdir(parents=True)
    (fanout / ".tmp-crashed").write_bytes(b"Z" + ZSTD_MAGIC + b"partial")
    (store.root / "sha256" / ".tmp-stray").write_bytes(b"junk")
    assert list(store.digests()) == []
    assert not store.has(digest)

    assert store.put(data) == digest
    assert store.get(digest) == data
    assert list(store.digests()) == [digest]
    assert (fanout / ".tmp-crashed").exists()

    program = Program.from_files({"policy.py": b"x = 1\n"})
    store.put_program(program)
    hexdigest = program.digest.removeprefix("sha256:")
    (store.root / "programs" / hexdigest[:2] / ".tmp-crashed").write_bytes(b"sha256:")
    assert list(store.program_digests()) == [program.digest]


def test_no_temp_file_left_after_put(store: FileBlobStore) -> None:
    store.put(COMPRESSIBLE)
    store.put_program(Program.from_files({"a": b"1", "b/c": b"2"}))
    assert not [p for p in all_files(store.root) if p.name.startswith(".tmp-")]


WRITER = """
    import os, random, sys
    from evopolicygym.records.blobs import FileBlobStore

    store = FileBlobStore(sys.argv[1] if len(sys.argv) > 1 else {root!r})
    rng = random.Random(int.from_bytes(os.urandom(8), "big"))
    print("ready", flush=True)
    i = 0
    while True:
        size = rng.choice([0, 10, 300, 70_000, 1_500_000, 3_000_000])
        if rng.random() < 0.5:
            data = rng.randbytes(size)
        else:
            data = (b"%d:" % i) * (size // 8 + 1)
        store.put(data)
        i += 1
"""


@pytest.mark.parametrize("delay", [0.25, 0.3, 0.35])
def test_sigkill_mid_write_leaves_no_partial_blob(tmp_path: Path, delay: float) -> None:
    # A kill lands inside a write only some of the time, hence several rounds.
    root = tmp_path / "blobs"
    child = run_python(WRITER.format(root=str(root)))
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    store = FileBlobStore(root)
    stored = list(store.digests())
    assert stored, "the writer stored nothing before it was killed"
    for digest in stored:
        store.verify(digest)
    finals = {store.path(d) for d in stored}
    others = [p for p in all_files(root) if p not in finals]
    assert all(p.name.startswith(".tmp-") for p in others), others
    # The store stays writable after the crash.
    assert store.get(store.put(b"after the crash")) == b"after the crash"


# -- concurrency -----------------------------------------------------------------------------


SHARED_WORKER = """
    import random, sys
    from evopolicygym.program import Program
    from evopolicygym.records.blobs import FileBlobStore

    store = FileBlobStore({root!r})
    worker = int(sys.argv[1])
    items = [(b"%d" % i) * (i * 37 % 5000) for i in range(150)]
    items += [random.Random(i).randbytes(20_000) for i in range(10)]
    shared = items[-1]
    random.Random(worker).shuffle(items)
    for data in items:
        store.put(data)
    for k in range(5):
        program = Program.from_files({{"policy.py": b"K = %d\\n" % k, "lib/shared.bin": shared}})
        store.put_program(program)
    print("done", flush=True)
"""


def test_concurrent_processes_writing_overlapping_content(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    code = textwrap.dedent(SHARED_WORKER.format(root=str(root)))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(n)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err.decode()
        assert out == b"done\n"
    store = FileBlobStore(root)
    expected = {sha((b"%d" % i) * (i * 37 % 5000)) for i in range(150)}
    expected |= {sha(random.Random(i).randbytes(20_000)) for i in range(10)}
    stored = set(store.digests())
    assert expected <= stored
    for digest in stored:
        store.verify(digest)
    programs = list(store.program_digests())
    assert len(programs) == 5
    for digest in programs:
        assert store.get_program(digest).digest == digest
    assert not [p for p in all_files(root) if p.name.startswith(".tmp-")]

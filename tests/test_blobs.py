"""BlobStore: content-addressed, compressed where it pays, verified on read, crash-safe."""

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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evopolicygym.program import Program
from evopolicygym.records import blobs
from evopolicygym.records.blobs import (
    MAX_BLOB_BYTES,
    BlobCorrupt,
    BlobError,
    BlobMissing,
    BlobStore,
)

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


def plant(store: BlobStore, digest: str, stored: bytes) -> None:
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
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    """The filesystem store; a test marked ``BOTH`` also runs on PostgreSQL (a database of
    its own, dropped after), the behaviour a Run and its readers rely on being the same."""
    if getattr(request, "param", "files") == "files":
        yield BlobStore(tmp_path / "blobs")
        return
    import pg

    pg.require_postgres()
    from evopolicygym.records.pgblobs import PgBlobStore

    try:
        store = PgBlobStore(pg.new_database(), create=True)
        try:
            yield store
        finally:
            store.close()
    finally:
        pg.drop_made()


# Tests of behaviour every backend shares run on each of them.
BOTH = pytest.mark.parametrize("store", ["files", "postgres"], indirect=True)


# -- round trip ------------------------------------------------------------------------------


payloads = st.one_of(
    st.binary(max_size=2048),
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=16), st.integers(1, 20_000)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=payloads)
@BOTH
def test_round_trip(store: BlobStore, data: bytes) -> None:
    digest = store.put(data)
    assert digest == sha(data)
    assert store.has(digest)
    assert store.get(digest) == data
    assert store.size(digest) == len(data)
    store.verify(digest)
    assert digest in set(store.digests())


def test_empty_blob(store: BlobStore) -> None:
    digest = store.put(b"")
    assert digest == sha(b"")
    assert store.get(digest) == b""
    assert store.size(digest) == 0
    assert store.path(digest).read_bytes() == b"R"


def test_layout_and_modes(store: BlobStore) -> None:
    digest = store.put(b"hello")
    hexdigest = digest.removeprefix("sha256:")
    path = store.root / "sha256" / hexdigest[:2] / hexdigest[2:]
    assert store.path(digest) == path
    assert path.is_file()
    for directory in (store.root, store.root / "sha256", path.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o400


def test_dedup_creates_no_new_file(store: BlobStore) -> None:
    first = store.put(COMPRESSIBLE)
    before = all_files(store.root)
    inode = store.path(first).stat().st_ino
    assert store.put(COMPRESSIBLE) == first
    assert store.put(bytearray(COMPRESSIBLE)) == first
    assert all_files(store.root) == before
    assert store.path(first).stat().st_ino == inode
    assert list(store.digests()) == [first]


@BOTH
def test_digests_sorted_and_fresh_store_empty(store: BlobStore) -> None:
    assert list(store.digests()) == []
    assert list(store.program_digests()) == []
    made = {store.put(bytes([i]) * i) for i in range(40)}
    assert list(store.digests()) == sorted(made)


@BOTH
def test_put_refuses_over_limit(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blobs, "MAX_BLOB_BYTES", 1000)
    store.put(b"x" * 1000)
    with pytest.raises(ValueError, match="limit"):
        store.put(b"x" * 1001)


# -- compression -----------------------------------------------------------------------------


def test_compressible_data_is_compressed(store: BlobStore) -> None:
    assert len(COMPRESSIBLE) == MiB
    digest = store.put(COMPRESSIBLE)
    stored = store.path(digest).read_bytes()
    assert stored[:1] == b"Z"
    assert stored[1:5] == ZSTD_MAGIC
    assert len(stored) < MiB // 10
    assert store.get(digest) == COMPRESSIBLE
    assert store.size(digest) == MiB


def test_random_data_is_stored_raw(store: BlobStore) -> None:
    data = random.Random(1).randbytes(MiB)
    digest = store.put(data)
    assert store.path(digest).read_bytes() == b"R" + data
    assert store.size(digest) == MiB


def test_small_data_is_stored_raw_even_if_compressible(store: BlobStore) -> None:
    data = b"a" * 255
    assert store.path(store.put(data)).read_bytes() == b"R" + data
    assert store.path(store.put(b"a" * 256)).read_bytes()[:1] == b"Z"


def test_marginal_gain_is_stored_raw(store: BlobStore) -> None:
    # Random bytes with a short repeated tail: zstd saves a little, but less than 10%.
    rng = random.Random(2)
    data = rng.randbytes(4000) + b"\x00" * 200
    frame = zstandard.ZstdCompressor(level=3).compress(data)
    assert len(frame) < len(data) and 10 * len(frame) > 9 * len(data)
    assert store.path(store.put(data)).read_bytes()[:1] == b"R"


# -- corruption ------------------------------------------------------------------------------


def assert_corrupt(store: BlobStore, digest: str) -> None:
    with pytest.raises(BlobCorrupt) as info:
        store.get(digest)
    assert info.value.digest == digest
    assert digest in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(BlobCorrupt):
        store.verify(digest)


@pytest.mark.parametrize("where", [1, 2, 7, 0.5, -1])
@pytest.mark.parametrize(
    "data", [COMPRESSIBLE, random.Random(3).randbytes(5000)], ids=["zstd", "raw"]
)
def test_flipped_byte_is_detected(store: BlobStore, data: bytes, where: float) -> None:
    digest = store.put(data)
    path = store.path(digest)
    stored = bytearray(path.read_bytes())
    index = int(len(stored) * where) if isinstance(where, float) else where % len(stored)
    stored[index] ^= 0x01
    overwrite(path, bytes(stored))
    assert_corrupt(store, digest)


@pytest.mark.parametrize(
    "data", [COMPRESSIBLE, b"raw bytes " * 50, b"tiny"], ids=["zstd", "raw", "tiny"]
)
@pytest.mark.parametrize("keep", [0, 1, 3, -1])
def test_truncated_file_is_detected(store: BlobStore, data: bytes, keep: int) -> None:
    digest = store.put(data)
    path = store.path(digest)
    stored = path.read_bytes()
    overwrite(path, stored[:keep])
    assert_corrupt(store, digest)


def test_unknown_marker_and_trailing_garbage(store: BlobStore) -> None:
    raw = store.put(b"some raw bytes")
    overwrite(store.path(raw), b"X" + b"some raw bytes")
    assert_corrupt(store, raw)
    with pytest.raises(BlobCorrupt, match="marker"):
        store.size(raw)

    packed = store.put(COMPRESSIBLE)
    overwrite(store.path(packed), store.path(packed).read_bytes() + b"\x00\x00")
    assert_corrupt(store, packed)


def zstd_frame_claiming(size: int) -> bytes:
    # Single-segment frame with an 8-byte content size field, then one empty last raw block.
    return ZSTD_MAGIC + b"\xe0" + size.to_bytes(8, "little") + b"\x01\x00\x00"


@pytest.mark.parametrize("claimed", [MAX_BLOB_BYTES + 1, 1 << 40, 1 << 63])
def test_huge_declared_size_is_refused_without_allocating(store: BlobStore, claimed: int) -> None:
    frame = zstd_frame_claiming(claimed)
    assert zstandard.frame_content_size(frame) == claimed
    digest = sha(b"pretend")
    plant(store, digest, b"Z" + frame)
    tracemalloc.start()
    try:
        with pytest.raises(BlobCorrupt, match="declares") as info:
            store.get(digest)
        with pytest.raises(BlobCorrupt, match="declares"):
            store.size(digest)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.digest == digest
    assert peak < 4 * MiB


def test_frame_without_content_size_is_refused(store: BlobStore) -> None:
    data = b"no size in this header " * 100
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data)
    assert zstandard.frame_content_size(frame) == -1
    digest = sha(data)
    plant(store, digest, b"Z" + frame)
    with pytest.raises(BlobCorrupt, match="content size"):
        store.get(digest)


def test_frame_declaring_a_smaller_size_than_it_holds(store: BlobStore) -> None:
    data = b"0123456789" * 100
    frame = bytearray(zstandard.ZstdCompressor(level=3).compress(data))
    # Descriptor 0x60: single segment, 2-byte content size (stored minus 256) right after it.
    assert frame[4] == 0x60
    frame[5:7] = (500 - 256).to_bytes(2, "little")
    digest = sha(data)
    plant(store, digest, b"Z" + bytes(frame))
    assert store.size(digest) == 500
    assert_corrupt(store, digest)


@BOTH
def test_missing_blob(store: BlobStore) -> None:
    digest = sha(b"never stored")
    assert not store.has(digest)
    for read in (store.get, store.verify, store.size):
        with pytest.raises(BlobMissing) as info:
            read(digest)
        assert info.value.digest == digest
        assert digest in str(info.value)
    assert isinstance(info.value, BlobError)


BAD_DIGESTS = [
    "sha256:../../etc",
    "sha256:../../../../etc/passwd",
    "sha256:" + "A" * 64,
    "sha256:" + "a" * 63,
    "sha256:" + "a" * 65,
    "sha256:" + "a" * 64 + "\n",
    "sha512:" + "a" * 64,
    "a" * 64,
    "",
    "sha256:" + "g" * 64,
]


@pytest.mark.parametrize("bad", BAD_DIGESTS)
def test_invalid_digest_strings_are_refused(store: BlobStore, bad: str) -> None:
    for call in (
        store.get,
        store.has,
        store.size,
        store.path,
        store.verify,
        store.get_program,
        store.has_program,
    ):
        with pytest.raises(ValueError, match="not a digest"):
            call(bad)
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


def test_leftover_temp_file_is_ignored(store: BlobStore) -> None:
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


def test_no_temp_file_left_after_put(store: BlobStore) -> None:
    store.put(COMPRESSIBLE)
    store.put_program(Program.from_files({"a": b"1", "b/c": b"2"}))
    assert not [p for p in all_files(store.root) if p.name.startswith(".tmp-")]


WRITER = """
    import os, random, sys
    from evopolicygym.records.blobs import BlobStore

    store = BlobStore(sys.argv[1] if len(sys.argv) > 1 else {root!r})
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
    store = BlobStore(root)
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
    from evopolicygym.records.blobs import BlobStore

    store = BlobStore({root!r})
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
    store = BlobStore(root)
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


@BOTH
def test_concurrent_threads_writing_the_same_blob(store: BlobStore) -> None:
    datas = [COMPRESSIBLE, b"small", random.Random(4).randbytes(100_000)] * 16
    with ThreadPoolExecutor(max_workers=8) as pool:
        digests = list(pool.map(store.put, datas))
    assert digests == [sha(d) for d in datas]
    assert sorted(store.digests()) == sorted(set(digests))
    for digest, data in zip(digests, datas, strict=True):
        assert store.get(digest) == data


# -- programs --------------------------------------------------------------------------------


PROGRAMS = [
    {"policy.py": b"def make_policy(context):\n    return None\n"},
    {
        "policy.py": "import lib.helpers\n",
        "lib/helpers.py": b"X = 1\n",
        "lib/deep/er/still/weights.bin": bytes(range(256)) * 64,
        "lib/deep/noise.bin": random.Random(5).randbytes(3000),
        "empty.txt": b"",
        "h\u00e9llo/\u65e5\u672c.txt": "unicode \u2603\n",
        "a b/c-d_e.f": b"\x00\xff\x00",
    },
    {"policy.py": b"x" * 100_000, "policy.pyi": b"x: int\n", "policy-data": b"\x00"},
]


@pytest.mark.parametrize("files", PROGRAMS, ids=["minimal", "nested-binary", "sorting"])
@BOTH
def test_program_round_trip(store: BlobStore, files: dict[str, bytes | str]) -> None:
    program = Program.from_files(files)
    assert not store.has_program(program.digest)
    assert store.put_program(program) == program.digest
    assert store.has_program(program.digest)
    back = store.get_program(program.digest)
    assert back == program
    assert back.files == program.files
    assert list(store.program_digests()) == [program.digest]
    tree = store.get(store.program_tree(program.digest))
    assert tree.startswith(b'{"entries":[')
    assert tree.endswith(b'],"format":"evopolicygym.program-tree/1"}')


def test_put_program_twice_is_a_no_op(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    before = all_files(store.root)
    store.put_program(program)
    assert all_files(store.root) == before


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.dictionaries(
        st.lists(
            st.sampled_from(["a", "b", "src", "\u00e9", "x.py", "Z"]), min_size=1, max_size=3
        ).map("/".join),
        st.binary(max_size=600),
        min_size=1,
        max_size=6,
    )
)
@BOTH
def test_program_round_trip_property(store: BlobStore, files: dict[str, bytes]) -> None:
    try:
        program = Program.from_files(files)
    except ValueError:
        return  # e.g. "a" and "a/b" together: not a program
    store.put_program(program)
    assert store.get_program(program.digest) == program


def test_shared_files_are_stored_once(store: BlobStore) -> None:
    weights = random.Random(6).randbytes(50_000)
    one = Program.from_files({"policy.py": b"V = 1\n", "weights.bin": weights, "README": b"hi"})
    two = Program.from_files(
        {"policy.py": b"V = 2\n", "data/weights.bin": weights, "README": b"hi"}
    )
    store.put_program(one)
    store.put_program(two)
    # Distinct contents: two policy.py, weights, README; plus one tree per program.
    assert len(list(store.digests())) == 4 + 2
    assert len(all_files(store.root / "sha256")) == 6
    assert sorted(store.program_digests()) == sorted([one.digest, two.digest])
    assert store.get_program(one.digest) == one
    assert store.get_program(two.digest) == two


def corrupt_program_error(store: BlobStore, digest: str) -> BlobCorrupt:
    with pytest.raises(BlobCorrupt) as info:
        store.get_program(digest)
    assert info.value.digest == digest
    assert digest in str(info.value)
    return info.value


def test_corrupt_file_blob_breaks_get_program(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    target = sha(program.read("lib/helpers.py"))
    overwrite(store.path(target), b"RX = 2\n")
    error = corrupt_program_error(store, program.digest)
    assert "lib/helpers.py" in str(error) and target in str(error)


def test_missing_file_blob_breaks_get_program(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    store.path(sha(program.read("empty.txt"))).unlink()
    error = corrupt_program_error(store, program.digest)
    assert isinstance(error.__cause__, BlobMissing)


def test_corrupt_tree_breaks_get_program(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    tree = store.path(store.program_tree(program.digest))
    stored = bytearray(tree.read_bytes())
    stored[len(stored) // 2] ^= 0x20
    overwrite(tree, bytes(stored))
    corrupt_program_error(store, program.digest)


def test_tree_of_another_program_is_refused(store: BlobStore) -> None:
    one = Program.from_files(PROGRAMS[0])
    two = Program.from_files(PROGRAMS[2])
    store.put_program(one)
    store.put_program(two)
    hexdigest = one.digest.removeprefix("sha256:")
    mapping = store.root / "programs" / hexdigest[:2] / hexdigest[2:]
    overwrite(mapping, store.program_tree(two.digest).encode() + b"\n")
    assert "rebuild" in str(corrupt_program_error(store, one.digest))


@pytest.mark.parametrize(
    "tree",
    [
        b"not json",
        b'{"entries":[],"format":"evopolicygym.program-tree/2"}',
        b'{"entries":[{"blob":"sha256:../x","path":"a","size":1}],"format":"evopolicygym.program-tree/1"}',
        b'{"entries":[],"format":"evopolicygym.program-tree/1","extra":1}',
    ],
)
def test_malformed_tree_is_refused(store: BlobStore, tree: bytes) -> None:
    program = Program.from_files(PROGRAMS[0])
    store.put_program(program)
    hexdigest = program.digest.removeprefix("sha256:")
    mapping = store.root / "programs" / hexdigest[:2] / hexdigest[2:]
    overwrite(mapping, store.put(tree).encode() + b"\n")
    corrupt_program_error(store, program.digest)


@pytest.mark.parametrize("content", [b"", b"sha256:abc\n", b"garbage", b"sha256:" + b"0" * 64])
def test_corrupt_program_mapping(store: BlobStore, content: bytes) -> None:
    program = Program.from_files(PROGRAMS[0])
    store.put_program(program)
    hexdigest = program.digest.removeprefix("sha256:")
    overwrite(store.root / "programs" / hexdigest[:2] / hexdigest[2:], content)
    corrupt_program_error(store, program.digest)


@BOTH
def test_unknown_program(store: BlobStore) -> None:
    digest = sha(b"no such program")
    assert not store.has_program(digest)
    with pytest.raises(BlobMissing) as info:
        store.get_program(digest)
    assert info.value.digest == digest
    assert "program" in str(info.value) and digest in str(info.value)


@BOTH
def test_put_program_refuses_a_forged_digest(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[0])
    forged = Program(program.files, sha(b"something else"))
    with pytest.raises(ValueError, match="does not match"):
        store.put_program(forged)
    assert not store.has_program(forged.digest)

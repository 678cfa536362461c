"""The BlobStore contract (``records.store.BlobStore``), written once and run on every backend:
blob files (``FileBlobStore``), the same with the pack (as ``open_store`` opens a directory)
and PostgreSQL (``PgBlobStore``, a database of its own per test, see support/pg.py).

Blobs are named by the digest of their bytes, stored once, in the codec's encoding, and
checked on every read: damage of any kind (a flipped byte, a cut, a bad frame, a lost file
blob of a program, a rewritten tree or mapping) is ``BlobCorrupt`` naming the digest, never
wrong bytes. What only one backend has (files and modes, the pack's SQLite, PostgreSQL's
chunks and triggers) is tested in test_blobs.py, test_blob_pack.py and test_pg_blobs.py.
"""

from __future__ import annotations

import hashlib
import pickle
import random
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evopolicygym.program import Program
from evopolicygym.records import blobcodec
from evopolicygym.records.blobcodec import MAX_BLOB_BYTES, BlobCorrupt, BlobError, BlobMissing
from evopolicygym.records.blobs import FileBlobStore
from evopolicygym.records.store import BlobStore
from tests.support import pg
from tests.support.blobdamage import lose_blob, overwrite_blob, overwrite_program, plant_blob

MiB = 1024 * 1024
COMPRESSIBLE = b"".join(b"step %08d reward %d\n" % (i, i % 7) for i in range(60_000))[:MiB]
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BACKENDS = ["files", "pack", "postgres"]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Backend:
    """How a test opens the backend's store again (``reopen``: a new handle on the same
    storage, as another process would)."""

    name: str
    where: str

    def open(self, *, create: bool = False) -> BlobStore:
        if self.name == "postgres":
            from evopolicygym.records.pgblobs import PgBlobStore

            return PgBlobStore(self.where, create=create)
        return FileBlobStore(self.where, pack=self.name == "pack")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param != "postgres":
        yield Backend(request.param, str(tmp_path / "blobs"))
        return
    pg.require_postgres()
    try:
        yield Backend("postgres", pg.new_database())
    finally:
        pg.drop_made()


@pytest.fixture
def store(backend: Backend) -> Iterator[BlobStore]:
    opened = backend.open(create=True)
    try:
        yield opened
    finally:
        opened.close()


# -- round trip ------------------------------------------------------------------------------


payloads = st.one_of(
    st.binary(max_size=2048),
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=16), st.integers(1, 20_000)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=payloads)
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
    assert store.stored_size(digest) == 1  # the marker byte alone


@pytest.mark.parametrize(
    "data",
    [COMPRESSIBLE, random.Random(1).randbytes(100_000), b"a" * 255, b"a" * 256, b"tiny"],
    ids=["compressible", "random", "small", "threshold", "tiny"],
)
def test_blobs_are_stored_in_the_codecs_encoding(store: BlobStore, data: bytes) -> None:
    digest = store.put(data)
    assert store.stored_size(digest) == len(blobcodec.encode(data))
    assert store.size(digest) == len(data)


def test_a_blob_is_stored_once(store: BlobStore) -> None:
    first = store.put(COMPRESSIBLE)
    stored = store.stored_size(first)
    assert store.put(COMPRESSIBLE) == first
    assert store.put(bytearray(COMPRESSIBLE)) == first
    assert list(store.digests()) == [first]
    assert store.stored_size(first) == stored


def test_put_many_returns_digests_in_order_each_stored_once(store: BlobStore) -> None:
    items = [b"one", b"two" * 200, b"one", COMPRESSIBLE, b"three"]
    digests = store.put_many(items)
    assert digests == [sha(item) for item in items]
    assert [store.get(d) for d in digests] == items
    assert list(store.digests()) == sorted(set(digests))
    assert store.put_many([]) == []


def test_digests_sorted_and_fresh_store_empty(store: BlobStore) -> None:
    assert list(store.digests()) == []
    assert list(store.program_digests()) == []
    made = {store.put(bytes([i]) * i) for i in range(40)}
    assert list(store.digests()) == sorted(made)


def test_put_refuses_over_limit(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blobcodec, "MAX_BLOB_BYTES", 1000)
    store.put(b"x" * 1000)
    with pytest.raises(ValueError, match="limit"):
        store.put(b"x" * 1001)
    with pytest.raises(ValueError, match="limit"):
        store.put_many([b"y", b"x" * 1001])


def test_a_reopened_store_sees_everything(backend: Backend, store: BlobStore) -> None:
    blob = store.put(COMPRESSIBLE)
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    store.close()
    again = backend.open()
    try:
        assert again.get(blob) == COMPRESSIBLE
        assert again.get_program(program.digest) == program
        assert blob in set(again.digests())
        assert list(again.program_digests()) == [program.digest]
    finally:
        again.close()


def test_a_store_pickles_and_its_copy_reads_and_writes(store: BlobStore) -> None:
    digest = store.put(b"sent along")
    store.get(digest)  # its connections open
    copy = pickle.loads(pickle.dumps(store))
    try:
        assert copy.get(digest) == b"sent along"
        assert copy.put(b"from the copy") == sha(b"from the copy")
    finally:
        copy.close()
    assert store.get(sha(b"from the copy")) == b"from the copy"


def test_concurrent_threads_writing_the_same_blob(store: BlobStore) -> None:
    datas = [COMPRESSIBLE, b"small", random.Random(4).randbytes(100_000)] * 16
    with ThreadPoolExecutor(max_workers=8) as pool:
        digests = list(pool.map(store.put, datas))
    assert digests == [sha(d) for d in datas]
    assert sorted(store.digests()) == sorted(set(digests))
    for digest, data in zip(digests, datas, strict=True):
        assert store.get(digest) == data


def test_a_sound_store_has_no_integrity_problems(store: BlobStore) -> None:
    store.put(COMPRESSIBLE)
    store.put_program(Program.from_files(PROGRAMS[0]))
    assert store.integrity_problems() == []


# -- what is not there, and what is not a digest -----------------------------------------------


def test_missing_blob(store: BlobStore) -> None:
    digest = sha(b"never stored")
    assert not store.has(digest)
    for read in (store.get, store.verify, store.size, store.stored_size):
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
        store.stored_size,
        store.verify,
        store.get_program,
        store.has_program,
        store.program_tree,
    ):
        with pytest.raises(ValueError, match="not a digest"):
            call(bad)


# -- damage ----------------------------------------------------------------------------------


def assert_corrupt(store: BlobStore, digest: str) -> None:
    with pytest.raises(BlobCorrupt) as info:
        store.get(digest)
    assert info.value.digest == digest
    assert digest in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(BlobCorrupt):
        store.verify(digest)


def stored_form(store: BlobStore, data: bytes) -> tuple[str, bytes]:
    """``data`` put, and the bytes the store keeps for it (the codec's encoding)."""
    digest = store.put(data)
    stored = blobcodec.encode(data)
    assert store.stored_size(digest) == len(stored)
    return digest, stored


@pytest.mark.parametrize("where", [1, 2, 7, 0.5, -1])
@pytest.mark.parametrize(
    "data", [COMPRESSIBLE, random.Random(3).randbytes(5000)], ids=["zstd", "raw"]
)
def test_flipped_byte_is_detected(store: BlobStore, data: bytes, where: float) -> None:
    digest, stored = stored_form(store, data)
    damaged = bytearray(stored)
    index = int(len(damaged) * where) if isinstance(where, float) else where % len(damaged)
    damaged[index] ^= 0x01
    overwrite_blob(store, digest, bytes(damaged))
    assert_corrupt(store, digest)


@pytest.mark.parametrize(
    "data", [COMPRESSIBLE, b"raw bytes " * 50, b"tiny"], ids=["zstd", "raw", "tiny"]
)
@pytest.mark.parametrize("keep", [0, 1, 3, -1])
def test_truncated_blob_is_detected(store: BlobStore, data: bytes, keep: int) -> None:
    digest, stored = stored_form(store, data)
    overwrite_blob(store, digest, stored[:keep])
    assert_corrupt(store, digest)


def test_unknown_marker_and_trailing_garbage(store: BlobStore) -> None:
    raw, _ = stored_form(store, b"some raw bytes")
    overwrite_blob(store, raw, b"X" + b"some raw bytes")
    assert_corrupt(store, raw)
    with pytest.raises(BlobCorrupt, match="marker"):
        store.get(raw)

    packed, stored = stored_form(store, COMPRESSIBLE)
    overwrite_blob(store, packed, stored + b"\x00\x00")
    assert_corrupt(store, packed)


def zstd_frame_claiming(size: int) -> bytes:
    # Single-segment frame with an 8-byte content size field, then one empty last raw block.
    return ZSTD_MAGIC + b"\xe0" + size.to_bytes(8, "little") + b"\x01\x00\x00"


@pytest.mark.parametrize("claimed", [MAX_BLOB_BYTES + 1, 1 << 40, 1 << 63])
def test_huge_declared_size_is_refused_without_allocating(store: BlobStore, claimed: int) -> None:
    frame = zstd_frame_claiming(claimed)
    assert zstandard.frame_content_size(frame) == claimed
    digest = sha(b"pretend")
    plant_blob(store, digest, b"Z" + frame)
    tracemalloc.start()
    try:
        with pytest.raises(BlobCorrupt, match="declares") as info:
            store.get(digest)
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
    plant_blob(store, digest, b"Z" + frame)
    with pytest.raises(BlobCorrupt, match="content size"):
        store.get(digest)


def test_frame_declaring_a_smaller_size_than_it_holds(store: BlobStore) -> None:
    data = b"0123456789" * 100
    frame = bytearray(zstandard.ZstdCompressor(level=3).compress(data))
    # Descriptor 0x60: single segment, 2-byte content size (stored minus 256) right after it.
    assert frame[4] == 0x60
    frame[5:7] = (500 - 256).to_bytes(2, "little")
    digest = sha(data)
    plant_blob(store, digest, b"Z" + bytes(frame))
    assert_corrupt(store, digest)


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
def test_program_round_trip_property(store: BlobStore, files: dict[str, bytes]) -> None:
    try:
        program = Program.from_files(files)
    except ValueError:
        return  # e.g. "a" and "a/b" together: not a program
    store.put_program(program)
    assert store.get_program(program.digest) == program


def test_put_program_twice_is_a_no_op(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    blobs, programs = list(store.digests()), list(store.program_digests())
    assert store.put_program(program) == program.digest
    assert (list(store.digests()), list(store.program_digests())) == (blobs, programs)


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
    assert sorted(store.program_digests()) == sorted([one.digest, two.digest])
    assert store.get_program(one.digest) == one
    assert store.get_program(two.digest) == two


def test_unknown_program(store: BlobStore) -> None:
    digest = sha(b"no such program")
    assert not store.has_program(digest)
    for read in (store.get_program, store.program_tree):
        with pytest.raises(BlobMissing) as info:
            read(digest)
        assert info.value.digest == digest and info.value.kind == "program"
        assert "program" in str(info.value) and digest in str(info.value)


def test_put_program_refuses_a_forged_digest(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[0])
    forged = Program(program.files, sha(b"something else"))
    with pytest.raises(ValueError, match="does not match"):
        store.put_program(forged)
    assert not store.has_program(forged.digest)


def corrupt_program_error(store: BlobStore, digest: str) -> BlobCorrupt:
    with pytest.raises(BlobCorrupt) as info:
        store.get_program(digest)
    assert info.value.digest == digest and info.value.kind == "program"
    assert digest in str(info.value)
    return info.value


def test_corrupt_file_blob_breaks_get_program(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    target = sha(program.read("lib/helpers.py"))
    overwrite_blob(store, target, b"RX = 2\n")
    error = corrupt_program_error(store, program.digest)
    assert "lib/helpers.py" in str(error) and target in str(error)


def test_missing_file_blob_breaks_get_program(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    lose_blob(store, sha(program.read("empty.txt")))
    error = corrupt_program_error(store, program.digest)
    assert isinstance(error.__cause__, BlobMissing)


def test_corrupt_tree_breaks_get_program(store: BlobStore) -> None:
    program = Program.from_files(PROGRAMS[1])
    store.put_program(program)
    tree = store.program_tree(program.digest)
    stored = bytearray(blobcodec.encode(store.get(tree)))
    stored[len(stored) // 2] ^= 0x20
    overwrite_blob(store, tree, bytes(stored))
    corrupt_program_error(store, program.digest)


def test_tree_of_another_program_is_refused(store: BlobStore) -> None:
    one = Program.from_files(PROGRAMS[0])
    two = Program.from_files(PROGRAMS[2])
    store.put_program(one)
    store.put_program(two)
    overwrite_program(store, one.digest, store.program_tree(two.digest).encode() + b"\n")
    assert "rebuild" in str(corrupt_program_error(store, one.digest))


@pytest.mark.parametrize(
    "tree",
    [
        b"not json",
        b'{"entries":[],"format":"evopolicygym.program-tree/2"}',
        b'{"entries":[{"blob":"sha256:../x","path":"a","size":1}],'
        b'"format":"evopolicygym.program-tree/1"}',
        b'{"entries":[],"format":"evopolicygym.program-tree/1","extra":1}',
    ],
)
def test_malformed_tree_is_refused(store: BlobStore, tree: bytes) -> None:
    program = Program.from_files(PROGRAMS[0])
    store.put_program(program)
    overwrite_program(store, program.digest, store.put(tree).encode() + b"\n")
    corrupt_program_error(store, program.digest)


@pytest.mark.parametrize("content", [b"", b"sha256:abc\n", b"garbage", b"sha256:" + b"0" * 64])
def test_corrupt_program_mapping(store: BlobStore, content: bytes) -> None:
    program = Program.from_files(PROGRAMS[0])
    store.put_program(program)
    overwrite_program(store, program.digest, content)
    corrupt_program_error(store, program.digest)

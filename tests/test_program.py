"""Programs: content-addressed snapshots of a policy directory."""

from __future__ import annotations

import copyreg
import os
import pickle
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evopolicygym.program import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_NAME_BYTES,
    MAX_TOTAL_BYTES,
    Program,
    ProgramError,
    program_digest,
)

MiB = 1024 * 1024
SAMPLE = {
    "policy.py": b"def make_policy(context):\n    return None\n",
    "lib/helpers.py": b"X = 1\n",
    "lib/data/weights.bin": bytes(range(256)) * 4,
    "README": "h\u00e9llo\n",
    "empty.txt": b"",
}


def make_tree(root: Path, files: dict[str, bytes | str], order=None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel in order if order is not None else files:
        data = files[rel]
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return root


def sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def test_limits_are_as_documented():
    assert MAX_FILES == 1000
    assert 64 * MiB == MAX_TOTAL_BYTES
    assert 16 * MiB == MAX_FILE_BYTES


# --- digests ---------------------------------------------------------------------------------


def test_digest_format_and_stability(tmp_path):
    root = make_tree(tmp_path / "p", SAMPLE)
    first = Program.from_directory(root)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", first.digest)
    second = Program.from_directory(root)
    assert second.digest == first.digest
    assert second == first
    assert first.digest == program_digest(first.files)


def test_from_directory_equals_from_files(tmp_path):
    root = make_tree(tmp_path / "p", SAMPLE)
    captured = Program.from_directory(root)
    built = Program.from_files(SAMPLE)
    assert captured.digest == built.digest
    assert captured.files == built.files
    assert captured.paths() == sorted(SAMPLE, key=lambda p: p.encode())
    assert captured.read("README") == "h\u00e9llo\n".encode()
    assert captured.read("lib/data/weights.bin") == SAMPLE["lib/data/weights.bin"]
    assert captured.size == sum(
        len(v.encode() if isinstance(v, str) else v) for v in SAMPLE.values()
    )
    with pytest.raises(KeyError):
        captured.read("missing.py")


def test_digest_independent_of_creation_order(tmp_path):
    forward = make_tree(tmp_path / "a", SAMPLE)
    backward = make_tree(tmp_path / "b", SAMPLE, order=list(reversed(list(SAMPLE))))
    assert Program.from_directory(forward).digest == Program.from_directory(backward).digest
    reordered = dict(reversed(list(SAMPLE.items())))
    assert Program.from_files(reordered).digest == Program.from_files(SAMPLE).digest
    pairs = [(k, v.encode() if isinstance(v, str) else v) for k, v in SAMPLE.items()]
    assert program_digest(pairs) == program_digest(list(reversed(pairs)))


def test_digest_changes_with_content_and_paths(tmp_path):
    base = Program.from_directory(make_tree(tmp_path / "base", SAMPLE)).digest
    variants = {
        "byte": {**SAMPLE, "policy.py": SAMPLE["policy.py"][:-2] + b"1\n"},
        "appended": {**SAMPLE, "empty.txt": b"\0"},
        "renamed": {
            **{k: v for k, v in SAMPLE.items() if k != "README"},
            "README.md": SAMPLE["README"],
        },
        "moved": {
            **{k: v for k, v in SAMPLE.items() if k != "lib/helpers.py"},
            "lib/data/helpers.py": SAMPLE["lib/helpers.py"],
        },
        "added": {**SAMPLE, "extra": b""},
        "removed": {k: v for k, v in SAMPLE.items() if k != "empty.txt"},
    }
    digests = {base}
    for name, files in variants.items():
        digest = Program.from_directory(make_tree(tmp_path / name, files)).digest
        assert digest == Program.from_files(files).digest
        digests.add(digest)
    assert len(digests) == len(variants) + 1


def test_length_prefixes_make_digest_unambiguous():
    cases = [
        [("a", b"bc")],
        [("ab", b"c")],
        [("abc", b"")],
        [("a", b""), ("bc", b"")],
        [("a", b"b"), ("c", b"")],
        [],
        [("", b"")],
    ]
    digests = [program_digest(c) for c in cases]
    assert len(set(digests)) == len(cases)
    assert Program.from_files({"a": b"bc"}).digest != Program.from_files({"ab": b"c"}).digest


# Tiny alphabets make concatenation ambiguities likely if the encoding had any.
_tiny = st.text(alphabet="ab/", max_size=3)
_tiny_files = st.dictionaries(_tiny, _tiny.map(str.encode), max_size=3)


@given(st.lists(_tiny_files, min_size=2, max_size=40, unique_by=lambda d: tuple(sorted(d.items()))))
@settings(max_examples=200)
def test_distinct_file_sets_have_distinct_digests(file_sets):
    digests = [program_digest(files.items()) for files in file_sets]
    assert len(set(digests)) == len(file_sets)


def test_str_and_bytes_data_agree():
    assert (
        Program.from_files({"a.py": "x = '\u00e9'\n"}).digest
        == Program.from_files({"a.py": "x = '\u00e9'\n".encode()}).digest
    )


@pytest.mark.parametrize(
    "bad", ["", "/abs.py", "a//b", "./a", "a/./b", "a/../b", "..", "a/", "a\\b", "a\0b", "\udcff"]
)
def test_from_files_rejects_unnormalized_paths(bad):
    with pytest.raises(ProgramError):
        Program.from_files({bad: b"x"})


# --- write_to --------------------------------------------------------------------------------


def test_write_to_restores_exactly(tmp_path):
    original = Program.from_directory(make_tree(tmp_path / "src", SAMPLE))
    out = original.write_to(tmp_path / "deep" / "out")
    assert out == tmp_path / "deep" / "out"
    restored = Program.from_directory(out)
    assert restored.digest == original.digest
    assert restored.files == original.files
    for rel, data in original.files:
        assert (out / rel).read_bytes() == data
    empty = tmp_path / "empty"
    empty.mkdir()
    assert Program.from_directory(original.write_to(empty)).digest == original.digest


def test_write_to_refuses_non_empty_target(tmp_path):
    program = Program.from_files(SAMPLE)
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_bytes(b"mine")
    with pytest.raises(ProgramError):
        program.write_to(target)
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]
    assert (target / "keep.txt").read_bytes() == b"mine"
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / ".git").mkdir()
    with pytest.raises(ProgramError):
        program.write_to(hidden)


_component = st.text(alphabet="abc_-.\u00e9", min_size=1, max_size=4).filter(
    lambda c: c not in (".", "..")
)
_path = st.lists(_component, min_size=1, max_size=3).map("/".join)


def _no_file_dir_clash(files: dict[str, bytes]) -> bool:
    return not any(q.startswith(p + "/") for p in files for q in files)


@given(st.dictionaries(_path, st.binary(max_size=64), max_size=8).filter(_no_file_dir_clash))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_write_to_round_trip_property(files):
    program = Program.from_files(files)
    with tempfile.TemporaryDirectory() as tmp:
        out = program.write_to(Path(tmp) / "out")
        captured = Program.from_directory(out)
    assert captured.digest == program.digest
    assert captured.files == program.files


def test_from_files_refuses_file_directory_clash(tmp_path):
    with pytest.raises(ProgramError):
        Program.from_files({"a": b"x", "a/b": b"y"}).write_to(tmp_path / "out")
    with pytest.raises(ProgramError):
        Program.from_files({"a": b"x", "a/b": b"y"})


@pytest.mark.parametrize("skipped", ["x.pyc", ".git/config", "__pycache__/m.py", "a/.git/b"])
def test_from_files_round_trips_through_directory(tmp_path, skipped):
    files = {"m.py": b"4", skipped: b"1"}
    try:
        program = Program.from_files(files)
    except ProgramError:
        return  # refusing such paths outright would be consistent too
    out = program.write_to(tmp_path / "out")
    assert Program.from_directory(out).digest == program.digest


# --- what a capture skips and refuses --------------------------------------------------------


def test_skips_git_pycache_and_pyc(tmp_path):
    root = make_tree(
        tmp_path / "p",
        {
            **SAMPLE,
            ".git/HEAD": b"ref: refs/heads/main\n",
            ".git/objects/ab/cdef": b"\x78\x9c",
            "__pycache__/policy.cpython-311.pyc": b"\0" * 16,
            "lib/__pycache__/helpers.cpython-311.pyc": b"\0" * 16,
            "lib/__pycache__/notes.txt": b"skipped with its directory",
            "lib/stale.pyc": b"\0" * 16,
            "lib/data/.git/x": b"nested .git directories are skipped too",
        },
    )
    program = Program.from_directory(root)
    assert program.paths() == Program.from_files(SAMPLE).paths()
    assert program.digest == Program.from_files(SAMPLE).digest


def test_does_not_skip_lookalikes(tmp_path):
    files = {
        ".gitignore": b"*.pyc\n",
        "git/x": b"",
        "pycache.py": b"",
        "a.pyc.txt": b"",
        ".pyx": b"",
    }
    program = Program.from_directory(make_tree(tmp_path / "p", files))
    assert sorted(program.paths()) == sorted(files)


@pytest.mark.parametrize("target_kind", ["file", "dir", "dangling"])
def test_refuses_symlinks(tmp_path, target_kind):
    root = make_tree(tmp_path / "p", SAMPLE)
    outside = tmp_path / "outside"
    if target_kind == "file":
        outside.write_bytes(b"secret")
    elif target_kind == "dir":
        make_tree(outside, {"x.py": b"secret"})
    os.symlink(outside, root / "lib" / "link")
    with pytest.raises(ProgramError, match=r"lib/link") as info:
        Program.from_directory(root)
    assert "symlink" in str(info.value)


def test_refuses_relative_symlink_inside_tree(tmp_path):
    root = make_tree(tmp_path / "p", SAMPLE)
    os.symlink("policy.py", root / "alias.py")
    with pytest.raises(ProgramError, match=r"alias\.py"):
        Program.from_directory(root)


def test_refuses_fifo(tmp_path):
    root = make_tree(tmp_path / "p", SAMPLE)
    os.mkfifo(root / "lib" / "pipe")
    with pytest.raises(ProgramError, match=r"lib/pipe"):
        Program.from_directory(root)  # must not block opening the FIFO


def test_refuses_non_utf8_file_name(tmp_path):
    root = make_tree(tmp_path / "p", SAMPLE)
    with open(os.path.join(os.fsencode(root), b"bad\xff.py"), "wb") as handle:
        handle.write(b"x")
    with pytest.raises(ProgramError, match="UTF-8"):
        Program.from_directory(root)


def test_refuses_missing_and_non_directory_roots(tmp_path):
    with pytest.raises(ProgramError):
        Program.from_directory(tmp_path / "missing")
    not_dir = tmp_path / "file.py"
    not_dir.write_bytes(b"x")
    with pytest.raises(ProgramError, match="directory"):
        Program.from_directory(not_dir)


# --- limits ----------------------------------------------------------------------------------


def _many(count: int) -> dict[str, bytes]:
    return {f"d{i % 7}/f{i:04d}.py": str(i).encode() for i in range(count)}


def test_file_count_limit(tmp_path):
    at_limit = make_tree(tmp_path / "ok", _many(MAX_FILES))
    (at_limit / "ignored.pyc").write_bytes(b"")  # skipped files do not count
    assert len(Program.from_directory(at_limit).files) == MAX_FILES
    over = make_tree(tmp_path / "over", _many(MAX_FILES + 1))
    with pytest.raises(ProgramError, match="files"):
        Program.from_directory(over)
    assert len(Program.from_files(_many(MAX_FILES)).files) == MAX_FILES
    with pytest.raises(ProgramError):
        Program.from_files(_many(MAX_FILES + 1))


def test_file_size_limit(tmp_path):
    ok = tmp_path / "ok"
    sparse(ok / "big.bin", MAX_FILE_BYTES)
    program = Program.from_directory(ok)
    assert program.size == MAX_FILE_BYTES
    assert program.read("big.bin") == bytes(MAX_FILE_BYTES)
    over = make_tree(tmp_path / "over", SAMPLE)
    sparse(over / "lib" / "big.bin", MAX_FILE_BYTES + 1)
    with pytest.raises(ProgramError, match=r"lib/big\.bin"):
        Program.from_directory(over)
    with pytest.raises(ProgramError, match=r"big\.bin"):
        Program.from_files({"big.bin": bytes(MAX_FILE_BYTES + 1)})


def test_total_size_limit(tmp_path):
    over = tmp_path / "over"
    for i in range(5):
        sparse(over / f"chunk{i}.bin", 14 * MiB)
    with pytest.raises(ProgramError, match="total"):
        Program.from_directory(over)
    chunk = bytes(14 * MiB)
    with pytest.raises(ProgramError):
        Program.from_files({f"chunk{i}.bin": chunk for i in range(5)})


def test_total_size_at_limit_is_accepted(tmp_path):
    root = tmp_path / "ok"
    for i in range(4):
        sparse(root / f"chunk{i}.bin", MAX_FILE_BYTES)
    assert 4 * MAX_FILE_BYTES == MAX_TOTAL_BYTES
    assert Program.from_directory(root).size == MAX_TOTAL_BYTES


# --- concurrent modification -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["in-place", "replace"])
def test_refuses_a_tree_that_changes_during_capture(tmp_path, mode):
    stable = {"policy.py": b"def make_policy(context):\n    ...\n", "lib/util.py": b"Y = 2\n"}
    root = make_tree(tmp_path / "p", stable)
    target = root / "lib" / "state.bin"
    staging = tmp_path / "staging.bin"  # outside the tree, same file system
    # Distinct sizes and contents, so any mix of two states is recognisable. Each state fits
    # in one page and "wb" truncates first, so one write() takes the file from empty to whole:
    # a reader can never legitimately see a half-written state.
    states = [bytes([65 + i]) * (500 + 800 * i) for i in range(5)]
    target.write_bytes(states[0])
    # in place, "wb" truncates before writing, so the empty file is a real transient state;
    # os.replace swaps whole files, so only the full states may ever be captured
    real_states = [*states, b""] if mode == "in-place" else states
    allowed = {Program.from_files({**stable, "lib/state.bin": s}).digest: s for s in real_states}

    stop = threading.Event()
    writes = 0

    def rewrite_forever() -> None:
        nonlocal writes
        i = 0
        while not stop.is_set():
            i += 1
            data = states[i % len(states)]
            if mode == "in-place":
                with open(target, "wb") as handle:
                    handle.write(data)
            else:
                staging.write_bytes(data)
                os.replace(staging, target)
            writes += 1

    writer = threading.Thread(target=rewrite_forever, daemon=True)
    successes: list[Program] = []
    errors: list[str] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the two threads finely
    writer.start()
    deadline = time.monotonic() + 2.5
    try:
        while time.monotonic() < deadline:
            try:
                successes.append(Program.from_directory(root))
            except ProgramError as exc:
                errors.append(str(exc))
            if len(errors) >= 50 and len(successes) + len(errors) >= 400:
                break
    finally:
        stop.set()
        writer.join(timeout=5)
        sys.setswitchinterval(interval)
    assert not writer.is_alive()
    assert writes > 0
    assert errors, f"no capture noticed the change ({len(successes)} captures, {writes} writes)"
    assert all("changed" in e for e in errors), sorted(set(errors))[:5]
    for program in successes:
        assert program.digest in allowed, "a capture mixed two states of the file"
        assert program.read("lib/state.bin") == allowed[program.digest]
        assert program.read("policy.py") == stable["policy.py"]


def test_names_no_filesystem_can_hold_are_refused() -> None:
    """A name over 255 bytes (or a path over 1024) is the program's fault, refused when it is
    captured, never an error of the Host's when the files are written."""
    Program.from_files({"a" * MAX_NAME_BYTES: b"", "d/" + "é" * 127 + "x": b""})  # 255 bytes each
    for path in ("a" * (MAX_NAME_BYTES + 1), "ok/" + "é" * 128, "/".join(["d" * 200] * 6)):
        with pytest.raises(ProgramError, match="at most"):
            Program.from_files({"policy.py": b"", path: b""})


def test_a_program_is_immutable_hashable_and_pickles_old_and_new():
    program = Program.from_files({"policy.py": b"x = 1\n", "lib/a.bin": b"\x00\xff"})
    same = Program.from_files({"lib/a.bin": b"\x00\xff", "policy.py": "x = 1\n"})
    assert (
        program == same
        and hash(program) == hash(same)
        and program != Program.from_files({"policy.py": b"x = 2\n"})
    )
    assert program != (program.files, program.digest)
    with pytest.raises(AttributeError):
        program.digest = "sha256:0"
    with pytest.raises(AttributeError):
        del program.files
    assert pickle.loads(pickle.dumps(program)) == program
    assert repr(program).startswith("Program(files=(('lib/a.bin', b'\\x00\\xff'),")

    # A Program pickled while it was a frozen slots dataclass: its class, then the state
    # [files, digest] (written here with a stand-in whose name is swapped for Program's).
    old = pickle.dumps(_AsPickledBefore(program.files, program.digest), protocol=2)
    stand_in = f"c{__name__}\n_AsPickledBefore\n".encode()
    assert stand_in in old
    assert pickle.loads(old.replace(stand_in, b"cevopolicygym.program\nProgram\n")) == program


class _AsPickledBefore:
    def __init__(self, files, digest):
        self.state = [files, digest]

    def __reduce_ex__(self, protocol):
        return (copyreg.__newobj__, (_AsPickledBefore,), self.state)

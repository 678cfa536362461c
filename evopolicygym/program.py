"""Programs: immutable, content-addressed snapshots of a policy source directory.

Imports only what capturing a directory needs (no dataclasses, pathlib or typing): the
Agent's ``evopolicy session submit`` loads this module for every Submission it makes.
"""

from __future__ import annotations

import hashlib
import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_TOTAL_BYTES",
    "Program",
    "ProgramError",
    "program_digest",
    "submitted_files",
]

MAX_FILES = 1_000
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)
MAX_PATH_BYTES = 1024  # a whole relative path, well under PATH_MAX with the Host's prefix

_DOMAIN = b"evopolicygym:program:v1\x00"
_SKIP_DIRS = frozenset({".git", "__pycache__"})
_SKIP_SUFFIXES = (".pyc",)


class ProgramError(ValueError):
    """A directory that cannot be a Program; the message names the path and the reason."""


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def program_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """``sha256:<hex>`` over a domain tag and length-prefixed, sorted (path, bytes) pairs.

    Length prefixes make the encoding unambiguous: no two file sets share a byte stream.
    """
    entries = sorted(files, key=lambda e: e[0].encode("utf-8"))
    h = hashlib.sha256(_DOMAIN)
    h.update(_u64(len(entries)))
    for path, data in entries:
        name = path.encode("utf-8")
        h.update(_u64(len(name)))
        h.update(name)
        h.update(_u64(len(data)))
        h.update(data)
    return "sha256:" + h.hexdigest()


def _check_relpath(path: str) -> str:
    if (
        not path
        or path.startswith("/")
        or any(part in ("", ".", "..") for part in path.split("/"))
        or "\\" in path
        or "\x00" in path
    ):
        raise ProgramError(f"{path!r}: not a normalized relative path")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ProgramError(f"{path!r}: file name is not valid UTF-8") from exc
    # What no filesystem the Host writes programs to can hold (NAME_MAX, PATH_MAX): refused
    # here, as the Agent's doing, rather than failing the Host when the files are written.
    if len(encoded) > MAX_PATH_BYTES or any(
        len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")
    ):
        shown = path if len(path) <= 80 else path[:77] + "..."
        raise ProgramError(
            f"{shown!r}: a path of at most {MAX_PATH_BYTES} bytes with names of at most "
            f"{MAX_NAME_BYTES} bytes each"
        )
    return path


class Program:
    """Sorted ``(path, bytes)`` pairs and their digest. Equal digests mean equal files.

    Immutable, compared and hashed by value (a frozen dataclass, written out so that
    importing this module does not import ``dataclasses``)."""

    __slots__ = ("digest", "files")
    files: tuple[tuple[str, bytes], ...]
    digest: str

    def __init__(self, files: tuple[tuple[str, bytes], ...], digest: str) -> None:
        object.__setattr__(self, "files", files)
        object.__setattr__(self, "digest", digest)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Program is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a Program is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Program)
        return (self.files, self.digest) == (other.files, other.digest)

    def __hash__(self) -> int:
        return hash((self.files, self.digest))

    def __repr__(self) -> str:
        return f"Program(files={self.files!r}, digest={self.digest!r})"

    def __reduce__(self) -> tuple[type[Program], tuple[tuple[tuple[str, bytes], ...], str]]:
        return (Program, (self.files, self.digest))

    def __setstate__(self, state: object) -> None:
        # A Program pickled when it was a frozen slots dataclass: its state is [files, digest].
        assert isinstance(state, (list, tuple)) and len(state) == 2
        object.__setattr__(self, "files", state[0])
        object.__setattr__(self, "digest", state[1])

    @classmethod
    def from_files(cls, files: Mapping[str, bytes | str]) -> Program:
        entries: list[tuple[str, bytes]] = []
        total = 0
        directories = {
            "/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)
        }
        for path, data in files.items():
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            _check_relpath(path)
            if path in directories:
                raise ProgramError(f"{path}: is both a file and a directory")
            parts = path.split("/")
            if any(part in _SKIP_DIRS for part in parts[:-1]) or path.endswith(_SKIP_SUFFIXES):
                # Capturing the written tree would drop it: the digest would not survive a round
                # trip.
                raise ProgramError(f"{path}: .git, __pycache__ and *.pyc are not part of a program")
            if len(raw) > MAX_FILE_BYTES:
                raise ProgramError(
                    f"{path}: {len(raw)} bytes exceeds the {MAX_FILE_BYTES}-byte file limit"
                )
            total += len(raw)
            entries.append((path, raw))
        if len(entries) > MAX_FILES:
            raise ProgramError(f"program has {len(entries)} files, more than {MAX_FILES}")
        if total > MAX_TOTAL_BYTES:
            raise ProgramError(f"program has {total} bytes, more than {MAX_TOTAL_BYTES}")
        entries.sort(key=lambda e: e[0].encode("utf-8"))
        return cls(tuple(entries), program_digest(entries))

    @classmethod
    def from_directory(cls, root: str | os.PathLike[str]) -> Program:
        """Capture a directory, refusing symlinks, special files, oversize trees and concurrent
        edits."""
        root_path = os.fspath(root)
        try:
            root_stat = os.stat(root_path)
        except OSError as exc:
            raise ProgramError(
                f"{root_path}: cannot read program directory ({exc.strerror})"
            ) from exc
        if not stat.S_ISDIR(root_stat.st_mode):
            raise ProgramError(f"{root_path}: program must be a directory")
        listing = _list_tree(root_path)
        files: dict[str, bytes] = {}
        total = 0
        for rel, before in listing.items():
            full = os.path.join(root_path, rel)
            try:
                with open(full, "rb", opener=_nofollow_opener) as handle:
                    opened = os.fstat(handle.fileno())
                    data = handle.read(MAX_FILE_BYTES + 1)
            except OSError as exc:
                raise ProgramError(f"{rel}: cannot read ({exc.strerror})") from exc
            if len(data) > MAX_FILE_BYTES:
                raise ProgramError(f"{rel}: exceeds the {MAX_FILE_BYTES}-byte file limit")
            if _fingerprint(opened) != before or len(data) != opened.st_size:
                raise ProgramError(f"{rel}: changed while the program was captured")
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise ProgramError(f"program exceeds the {MAX_TOTAL_BYTES}-byte total limit")
            files[rel] = data
        if _list_tree(root_path) != listing:
            raise ProgramError(f"{root_path}: changed while the program was captured")
        return cls.from_files(files)

    def read(self, path: str) -> bytes:
        for name, data in self.files:
            if name == path:
                return data
        raise KeyError(path)

    def paths(self) -> list[str]:
        return [name for name, _ in self.files]

    @property
    def size(self) -> int:
        return sum(len(data) for _, data in self.files)

    def write_to(self, directory: str | os.PathLike[str]) -> Path:
        """Write the files into ``directory`` (created; must be empty) and return it."""
        from pathlib import Path

        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        if any(target.iterdir()):
            raise ProgramError(f"{target}: refusing to write a program into a non-empty directory")
        for rel, data in self.files:
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "xb") as handle:
                handle.write(data)
        return target


def _nofollow_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _fingerprint(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _list_tree(root: str) -> dict[str, tuple[int, int, int, int]]:
    """Relative path -> fingerprint of every regular file, refusing what a Program may not hold."""
    found: dict[str, tuple[int, int, int, int]] = {}
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError as exc:
            raise ProgramError(f"{rel_dir or '.'}: cannot list ({exc.strerror})") from exc
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise ProgramError(f"{rel}: symlinks are not allowed in a program")
            if stat.S_ISDIR(st.st_mode):
                if entry.name not in _SKIP_DIRS:
                    stack.append(rel)
                continue
            if not stat.S_ISREG(st.st_mode):
                raise ProgramError(f"{rel}: special files are not allowed in a program")
            if entry.name.endswith(_SKIP_SUFFIXES):
                continue
            _check_relpath(rel)
            found[rel] = _fingerprint(st)
            if len(found) > MAX_FILES:
                raise ProgramError(f"program has more than {MAX_FILES} files")
            if st.st_size > MAX_FILE_BYTES:
                raise ProgramError(f"{rel}: exceeds the {MAX_FILE_BYTES}-byte file limit")
    return found


def submitted_files(
    directory: str | os.PathLike[str],
) -> tuple[dict[str, bytes] | None, str | None]:
    """A program directory as a Session submit request carries it: (its files, None), or
    (None, why it cannot be a Program), the Host records either. The reason is text the
    wire carries: a name that is not UTF-8 is shown escaped."""
    try:
        return dict(Program.from_directory(directory).files), None
    except ProgramError as exc:
        return None, str(exc).encode("utf-8", "backslashreplace").decode("utf-8")

"""The blob store in a directory (``FileBlobStore``): blob files, and a pack of small ones.

Layout under the store root (a Run's ``blobs/`` directory)::

    sha256/<2 hex>/<62 hex>     one blob, in ``blobcodec``'s encoding (marker byte + body)
    programs/<2 hex>/<62 hex>   program digest -> digest of its tree blob (one line)
    pack.db                     small blobs and program mappings, packed (see below)

One implementation of ``store.BlobStore`` (``pgblobs.PgBlobStore`` is its sibling); digests,
the encoding, program trees and the errors are ``blobcodec``'s. Files reach their final path only by
``rename`` of a fully written, fsynced temp file, so a final path never holds a partial blob;
temp files left by a crash start with ``.tmp-`` and are ignored by readers.

A store opened with ``pack=True`` (``location.open_store`` does) writes each blob whose
encoded form is at most ``PACK_MAX_BYTES``, and each program's tree mapping, as a row of
``pack.db`` (SQLite, WAL, ``synchronous=FULL``; tables ``blobs(digest, data)`` holding the
same marker-byte encoding as a file, and ``programs(digest, tree)``) instead of a file of its
own: a file and its fan-out directory take a filesystem block each (4 KiB here) however
small the blob, and an fsynced SQLite commit is cheaper than an fsynced file, rename and
directory. Larger blobs stay files. Every reader looks in both places, so a store written
before the pack (all files) and one written with it read the same; every read is checked
against the digest wherever the bytes came from.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import re
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evopolicygym.program import Program
from evopolicygym.records import blobcodec
from evopolicygym.records.blobcodec import (
    HEAD_BYTES,
    BlobCorrupt,
    BlobMissing,
    blob_digest,
    check_blob_size,
    check_digest,
    check_program,
    decode,
    decoded_size,
    encode,
    is_digest,
    program_blobs,
    rebuild_program,
)
from evopolicygym.records.sqlite import read_only_connection
from evopolicygym.records.store import StoreError

__all__ = ["PACK_MAX_BYTES", "FileBlobStore"]

# Blobs whose encoded form is at most this many bytes go to the pack (when packing).
PACK_MAX_BYTES = 64 * 1024
PACK_NAME = "pack.db"
_PACK_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS blobs (digest TEXT PRIMARY KEY NOT NULL, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS programs (digest TEXT PRIMARY KEY NOT NULL, tree TEXT NOT NULL)",
)
_PACK_BUSY_MS = 30_000

_FANOUT_RE = re.compile(r"[0-9a-f]{2}")
_REST_RE = re.compile(r"[0-9a-f]{62}")
_TMP_PREFIX = ".tmp-"
_DIR_MODE = 0o700
_FILE_MODE = 0o400


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(path: Path) -> None:
    """Create ``path`` and missing ancestors as 0700, making each new entry durable."""
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, _DIR_MODE)
        except FileExistsError:
            continue
        _fsync_dir(directory.parent)


def _write_atomic(final: Path, payload: bytes) -> None:
    parent = final.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=parent)
    except FileNotFoundError:
        _make_dirs(parent)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), _FILE_MODE)
            os.fsync(handle.fileno())
        # Concurrent writers of the same name hold the same bytes, so either rename may win.
        os.rename(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(parent)


def _no_table(exc: sqlite3.DatabaseError) -> bool:
    """A pack without the table asked for holds none of its rows: one whose writer stopped
    before making its tables (they are made together, before any row)."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith("no such table")


class FileBlobStore:
    """Content-addressed, immutable blobs under ``root`` (a ``store.BlobStore``); safe for
    concurrent writers, threads and processes alike."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        pack: bool = False,
        read_only: bool = False,
        live: bool = False,
    ) -> None:
        """``pack``: write small blobs and program mappings to ``pack.db`` (see above);
        reads look there either way. ``read_only``: the pack is only read (see
        ``records.sqlite.read_only_connection``), with ``live`` as other processes add to it."""
        self.root = Path(root)
        self._blobs = self.root / "sha256"
        self._programs = self.root / "programs"
        self._packing = pack and not read_only
        self._read_only = read_only
        self._live = live
        self._pack_lock = threading.RLock()
        self._pack_conn: sqlite3.Connection | None = None
        self._pack_ready = False  # this connection has made sure of the tables and WAL mode
        self._pack_pid = os.getpid()

    def __repr__(self) -> str:
        return f"FileBlobStore({str(self.root)!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Sent to another process: it opens the pack on first use.
        return {
            "root": str(self.root),
            "pack": self._packing,
            "read_only": self._read_only,
            "live": self._live,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        FileBlobStore.__init__(
            self,
            state["root"],
            pack=bool(state["pack"]),
            read_only=bool(state["read_only"]),
            live=bool(state.get("live", False)),
        )

    # -- the pack --------------------------------------------------------------------------

    @property
    def packing(self) -> bool:
        """Whether small blobs and program mappings are written to the pack."""
        return self._packing

    @property
    def pack_path(self) -> Path:
        return self.root / PACK_NAME

    def _pack(self, *, create: bool = False) -> sqlite3.Connection | None:
        """The pack's connection (under ``_pack_lock``); None when there is no pack and
        ``create`` is not asked. Only a writer (``create``) makes the file, its tables and its
        WAL mode: reading a store (``record verify``) changes nothing in it, a damaged pack
        included. A forked child opens its own. ``sqlite3.DatabaseError`` if it cannot be read."""
        if self._pack_conn is None or self._pack_pid != os.getpid():
            self._pack_conn, self._pack_ready = None, False
            path = self.pack_path
            if not path.exists():
                if not create:
                    return None
                _make_dirs(self.root)
            if self._read_only:
                conn = read_only_connection(path, "the blob pack", live=self._live)
            else:
                conn = sqlite3.connect(
                    path,
                    timeout=_PACK_BUSY_MS / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.execute(f"PRAGMA busy_timeout = {_PACK_BUSY_MS}")
                conn.execute("PRAGMA synchronous = FULL")
            self._pack_conn, self._pack_pid = conn, os.getpid()
        conn = self._pack_conn
        if create and not self._pack_ready:
            path = self.pack_path
            new = path.stat().st_size == 0
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _PACK_SCHEMA:
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.rollback()
                raise
            if new:
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o600)
                _fsync_dir(self.root)
            self._pack_ready = True
        return conn

    def _pack_get(self, table: str, column: str, digest: str) -> Any:
        with self._pack_lock:
            try:
                conn = self._pack()
                if conn is None:
                    return None
                row = conn.execute(
                    f"SELECT {column} FROM {table} WHERE digest = ?", (digest,)
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                if _no_table(exc):
                    return None
                raise BlobCorrupt(
                    digest, f"the pack {self.pack_path} cannot be read ({exc})"
                ) from exc
        return None if row is None else row[0]

    def _pack_keys(self, table: str) -> list[str]:
        with self._pack_lock:
            try:
                conn = self._pack()
                if conn is None:
                    return []
                return [
                    row[0] for row in conn.execute(f"SELECT digest FROM {table} ORDER BY digest")
                ]
            except sqlite3.DatabaseError as exc:
                if _no_table(exc):
                    return []
                raise StoreError(f"the blob pack {self.pack_path} cannot be read ({exc})") from exc

    def _pack_write(self, statement: str, rows: list[tuple[str, Any]]) -> None:
        """One commit of ``rows`` to the pack. Media gone read-only under the open pack (a
        read-only remount keeps an open file writable) refuse it, as they refuse a new file."""
        with self._pack_lock:
            conn = self._pack(create=True)
            assert conn is not None
            if os.statvfs(self.root).f_flag & os.ST_RDONLY:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self.pack_path))
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(statement, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.rollback()
                raise

    def _pack_put(self, rows: list[tuple[str, bytes]]) -> None:
        self._pack_write("INSERT OR IGNORE INTO blobs (digest, data) VALUES (?, ?)", rows)

    # -- blobs -----------------------------------------------------------------------------

    def path(self, digest: str) -> Path:
        """Final path of the blob ``digest`` as a file of its own (which may or may not exist;
        a packed blob is a row of ``pack_path`` instead)."""
        hexdigest = check_digest(digest)[len("sha256:") :]
        return self._blobs / hexdigest[:2] / hexdigest[2:]

    def put(self, data: bytes) -> str:
        """Store ``data`` (if not already stored) and return its ``sha256:<hex>`` digest."""
        data = bytes(data)
        check_blob_size(len(data))
        return self.put_many([data])[0]

    def put_many(self, items: list[bytes]) -> list[str]:
        """Store each of ``items`` (as ``put``) and return their digests, in order; the
        packed ones in one commit."""
        digests: list[str] = []
        packed: list[tuple[str, bytes]] = []
        for item in items:
            data = bytes(item)
            check_blob_size(len(data))
            digest = blob_digest(data)
            digests.append(digest)
            if self.has(digest):
                continue
            self._check_writable()
            encoded = encode(data)
            if self._packing and len(encoded) <= PACK_MAX_BYTES:
                packed.append((digest, encoded))
            else:
                _write_atomic(self.path(digest), encoded)
        if packed:
            self._pack_put(packed)
        return digests

    def _check_writable(self) -> None:
        # Read-only media refuse a write anyway; a reader's store (open_store(reader=True))
        # sits on writable media and must refuse it here.
        if self._read_only:
            raise StoreError(f"the blobs at {self.root} are open read-only: nothing is written")

    def _read(self, digest: str) -> bytes:
        final = self.path(digest)
        try:
            with open(final, "rb") as handle:
                length = os.fstat(handle.fileno()).st_size
                if length > blobcodec.MAX_BLOB_BYTES + 1:
                    raise BlobCorrupt(digest, f"file holds {length} bytes, more than any blob")
                return handle.read()
        except FileNotFoundError:
            stored = self._pack_get("blobs", "data", digest)
            if stored is None:
                raise BlobMissing(digest) from None
            if not isinstance(stored, bytes):
                raise BlobCorrupt(
                    digest, f"the pack holds a {type(stored).__name__}, not bytes"
                ) from None
            return stored

    def get(self, digest: str) -> bytes:
        """The blob's bytes, checked against its digest."""
        return decode(digest, self._read(digest))

    def verify(self, digest: str) -> None:
        """Raise ``BlobMissing`` or ``BlobCorrupt`` unless the blob reads back intact."""
        self.get(digest)

    def has(self, digest: str) -> bool:
        return (
            self.path(digest).is_file()
            or self._pack_get("blobs", "length(data)", digest) is not None
        )

    def size(self, digest: str) -> int:
        """Uncompressed size, from the file length or the zstd frame header (content unchecked)."""
        final = self.path(digest)
        try:
            with open(final, "rb") as handle:
                head = handle.read(HEAD_BYTES)
                length = os.fstat(handle.fileno()).st_size
        except FileNotFoundError:
            stored = self._pack_get("blobs", "data", digest)
            if stored is None:
                raise BlobMissing(digest) from None
            head, length = bytes(stored[:HEAD_BYTES]), len(stored)
        return decoded_size(digest, head, length)

    def digests(self) -> Iterator[str]:
        """Digests of all stored blobs, in sorted order."""
        files = (f"sha256:{prefix}{rest}" for prefix, rest in _walk_fanout(self._blobs))
        yield from _merged(files, self._pack_keys("blobs"))

    def stored_size(self, digest: str) -> int:
        """Bytes the blob takes as stored (its encoded form, in a file or the pack)."""
        try:
            return os.lstat(self.path(digest)).st_size
        except FileNotFoundError:
            length = self._pack_get("blobs", "length(data)", digest)
            if length is None:
                raise BlobMissing(digest) from None
            return int(length)

    # -- programs --------------------------------------------------------------------------

    def _program_path(self, digest: str) -> Path:
        hexdigest = check_digest(digest)[len("sha256:") :]
        return self._programs / hexdigest[:2] / hexdigest[2:]

    def put_program(self, program: Program) -> str:
        """Store each file and the program's tree as blobs; return ``program.digest``."""
        check_program(program)
        if self.has_program(program.digest):
            return program.digest
        # The files and the tree in one put (one commit where they are packed).
        tree_digest = self.put_many(program_blobs(program))[-1]
        # Recorded last: a program's mapping implies its tree and every file blob are durable.
        self._record_program(program.digest, tree_digest)
        return program.digest

    def _record_program(self, digest: str, tree_digest: str) -> None:
        """Map program ``digest`` to its tree blob (once per program)."""
        self._check_writable()
        if self._packing:
            self._pack_write(
                "INSERT OR IGNORE INTO programs (digest, tree) VALUES (?, ?)",
                [(digest, tree_digest)],
            )
            return
        _write_atomic(self._program_path(digest), tree_digest.encode("ascii") + b"\n")

    def close(self) -> None:
        """Close the pack's connection, if open (its WAL is checkpointed into it)."""
        with self._pack_lock:
            if self._pack_conn is not None and self._pack_pid == os.getpid():
                self._pack_conn.close()
            self._pack_conn = None

    def integrity_problems(self) -> list[str]:
        """The backend's own check of its storage, beyond each blob's digest (a database's
        append-only triggers, say): one message per problem. Files have none to report
        (each blob is checked when it is read); the pack has SQLite's ``quick_check``."""
        try:
            with self._pack_lock:
                conn = self._pack()
                if conn is None:
                    return []
                rows = conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return [f"the blob pack {self.pack_path} is damaged: {exc}"]
        messages = [str(row[0]) for row in rows]
        return (
            []
            if messages == ["ok"]
            else [f"the blob pack {self.pack_path} is damaged: {m}" for m in messages]
        )

    def has_program(self, digest: str) -> bool:
        return (
            self._program_path(digest).is_file()
            or self._pack_get("programs", "1", digest) is not None
        )

    def program_tree(self, digest: str) -> str:
        """Digest of the tree blob recorded for program ``digest``."""
        try:
            raw = self._program_path(digest).read_bytes()
        except FileNotFoundError:
            tree = self._pack_get("programs", "tree", digest)
            if tree is None:
                raise BlobMissing(digest, "program") from None
            raw = tree.encode("ascii", "replace") + b"\n" if isinstance(tree, str) else b""
        text = raw[:-1].decode("ascii", "replace") if raw.endswith(b"\n") else ""
        if not is_digest(text):
            raise BlobCorrupt(digest, f"tree reference {raw[:80]!r} is not a digest", "program")
        return text

    def get_program(self, digest: str) -> Program:
        """Rebuild the program from its tree; ``BlobCorrupt`` unless it has digest ``digest``."""
        return rebuild_program(digest, self.program_tree(digest), self.get)

    def program_digests(self) -> Iterator[str]:
        """Digests of all stored programs, in sorted order."""
        files = (f"sha256:{prefix}{rest}" for prefix, rest in _walk_fanout(self._programs))
        yield from _merged(files, self._pack_keys("programs"))


def _merged(files: Iterator[str], packed: list[str]) -> Iterator[str]:
    """The sorted union of two sorted digest sequences (a digest in both, once)."""
    last = None
    for digest in heapq.merge(files, packed):
        if digest != last:
            yield digest
            last = digest


def _walk_fanout(top: Path) -> Iterator[tuple[str, str]]:
    try:
        prefixes = sorted(e.name for e in os.scandir(top) if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return
    for prefix in prefixes:
        if _FANOUT_RE.fullmatch(prefix) is None:
            continue
        try:
            names = sorted(
                e.name for e in os.scandir(top / prefix) if e.is_file(follow_symlinks=False)
            )
        except FileNotFoundError:
            continue
        for name in names:
            if _REST_RE.fullmatch(name) is not None:
                yield prefix, name

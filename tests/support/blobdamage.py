"""Damaging a store's blobs and program mappings on purpose, wherever they are kept: in a
store directory a file of their own (``blobs/sha256/``, ``blobs/programs/``) or a row of the
blob pack (``blobs/pack.db``); in PostgreSQL rows of the blob tables, changed behind their
append-only triggers. For tests of what verify, replay, resume and the readers say then,
and for the blob contract suite (tests/test_blob_contract.py) on every backend."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evopolicygym.records.blobs import PACK_MAX_BYTES, FileBlobStore
from evopolicygym.records.store import BlobStore

# The pack's tables as ``records.blobs`` makes them, for planting a row in a pack not made yet.
_PACK_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS blobs (digest TEXT PRIMARY KEY NOT NULL, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS programs (digest TEXT PRIMARY KEY NOT NULL, tree TEXT NOT NULL)",
)


@contextlib.contextmanager
def _pack(blobs: FileBlobStore) -> Iterator[sqlite3.Connection]:
    blobs.close()  # the store's own connection reopens and sees the change
    conn = sqlite3.connect(blobs.pack_path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def _tamper(blobs: BlobStore, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Statements on a PostgreSQL store's database, in one transaction, past its append-only
    triggers (a superuser's replica role skips them), as damage or an attacker would."""
    import psycopg

    url: str = blobs._url  # type: ignore[attr-defined]
    with psycopg.connect(url) as connection:
        connection.execute("SET LOCAL session_replication_role = replica")
        for statement, args in statements:
            connection.execute(statement, args)


def _program_file(blobs: FileBlobStore, digest: str) -> Path:
    hexdigest = digest.removeprefix("sha256:")
    return blobs.root / "programs" / hexdigest[:2] / hexdigest[2:]


def lose_blob(blobs: BlobStore, digest: str) -> None:
    """The blob ``digest`` is gone."""
    if not isinstance(blobs, FileBlobStore):
        _tamper(
            blobs,
            ("DELETE FROM blob_chunks WHERE digest = %s", (digest,)),
            ("DELETE FROM blobs WHERE digest = %s", (digest,)),
        )
        return
    path = blobs.path(digest)
    if path.exists():
        path.unlink()
        return
    with _pack(blobs) as conn:
        assert conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,)).rowcount == 1


def overwrite_blob(blobs: BlobStore, digest: str, stored: bytes) -> None:
    """The blob ``digest`` now holds ``stored`` (a marker byte and body, as written)."""
    if not isinstance(blobs, FileBlobStore):
        _rewrite_rows(blobs, digest, stored)
        return
    path = blobs.path(digest)
    if path.exists():
        path.chmod(0o600)
        path.write_bytes(stored)
        return
    with _pack(blobs) as conn:
        assert (
            conn.execute("UPDATE blobs SET data = ? WHERE digest = ?", (stored, digest)).rowcount
            == 1
        )


def _rewrite_rows(blobs: BlobStore, digest: str, stored: bytes, *, new: bool = False) -> None:
    """A PostgreSQL blob's header and one chunk holding ``stored``; the header's stored size
    agrees with it (the tables allow no empty blob: an empty one's header says 1 byte)."""
    header = (
        "INSERT INTO blobs (digest, size, stored_size, chunks) VALUES (%s, 0, %s, 1)"
        if new
        else "UPDATE blobs SET stored_size = %s, chunks = 1 WHERE digest = %s"
    )
    size = max(len(stored), 1)
    _tamper(
        blobs,
        ("DELETE FROM blob_chunks WHERE digest = %s", (digest,)),
        (header, (digest, size) if new else (size, digest)),
        ("INSERT INTO blob_chunks (digest, seq, data) VALUES (%s, 0, %s)", (digest, stored)),
    )


def plant_blob(blobs: BlobStore, digest: str, stored: bytes) -> None:
    """A blob ``digest`` holding ``stored`` that no put wrote, where the store would keep it
    (a packing store's pack for a small one)."""
    if not isinstance(blobs, FileBlobStore):
        _rewrite_rows(blobs, digest, stored, new=True)
        return
    if blobs.packing and len(stored) <= PACK_MAX_BYTES:
        blobs.pack_path.parent.mkdir(parents=True, exist_ok=True)
        with _pack(blobs) as conn:
            for statement in _PACK_SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO blobs (digest, data) VALUES (?, ?)", (digest, stored))
        return
    path = blobs.path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(stored)


def lose_program(blobs: BlobStore, digest: str) -> None:
    """Program ``digest``'s mapping to its tree is gone."""
    if not isinstance(blobs, FileBlobStore):
        _tamper(blobs, ("DELETE FROM program_trees WHERE digest = %s", (digest,)))
        return
    path = _program_file(blobs, digest)
    if path.exists():
        path.unlink()
        return
    with _pack(blobs) as conn:
        assert conn.execute("DELETE FROM programs WHERE digest = ?", (digest,)).rowcount == 1


def overwrite_program(blobs: BlobStore, digest: str, content: bytes) -> None:
    """Program ``digest``'s mapping now reads ``content`` (a file's line, newline included;
    a row holds it without the newline)."""
    tree = (content[:-1] if content.endswith(b"\n") else content).decode("ascii", "replace")
    if not isinstance(blobs, FileBlobStore):
        # The replica role skips the foreign key too: the tree may name no blob.
        _tamper(blobs, ("UPDATE program_trees SET tree = %s WHERE digest = %s", (tree, digest)))
        return
    path = _program_file(blobs, digest)
    if path.exists():
        os.chmod(path, 0o600)
        path.write_bytes(content)
        return
    with _pack(blobs) as conn:
        assert (
            conn.execute("UPDATE programs SET tree = ? WHERE digest = ?", (tree, digest)).rowcount
            == 1
        )

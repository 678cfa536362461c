"""Damaging a directory store's blobs and program mappings on purpose, wherever they are
kept: a file of their own (``blobs/sha256/``, ``blobs/programs/``) or a row of the blob pack
(``blobs/pack.db``), for tests of what verify, replay, resume and the readers say then."""

from __future__ import annotations

import contextlib
import os
import sqlite3

from evopolicygym.records.blobs import BlobStore


@contextlib.contextmanager
def _pack(blobs: BlobStore) -> sqlite3.Connection:  # type: ignore[misc]
    blobs.close()  # the store's own connection reopens and sees the change
    conn = sqlite3.connect(blobs.pack_path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def lose_blob(blobs: BlobStore, digest: str) -> None:
    """The blob ``digest`` is gone."""
    path = blobs.path(digest)
    if path.exists():
        path.unlink()
        return
    with _pack(blobs) as conn:
        assert conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,)).rowcount == 1


def overwrite_blob(blobs: BlobStore, digest: str, stored: bytes) -> None:
    """The blob ``digest`` now holds ``stored`` (a marker byte and body, as written)."""
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


def lose_program(blobs: BlobStore, digest: str) -> None:
    """Program ``digest``'s mapping to its tree is gone."""
    path = blobs._program_path(digest)
    if path.exists():
        path.unlink()
        return
    with _pack(blobs) as conn:
        assert conn.execute("DELETE FROM programs WHERE digest = ?", (digest,)).rowcount == 1


def overwrite_program(blobs: BlobStore, digest: str, content: bytes) -> None:
    """Program ``digest``'s mapping now reads ``content`` (a file's line, newline included)."""
    path = blobs._program_path(digest)
    if path.exists():
        os.chmod(path, 0o600)
        path.write_bytes(content)
        return
    tree = content[:-1] if content.endswith(b"\n") else content
    with _pack(blobs) as conn:
        assert (
            conn.execute(
                "UPDATE programs SET tree = ? WHERE digest = ?",
                (tree.decode("ascii", "replace"), digest),
            ).rowcount
            == 1
        )

"""Blobs and Programs in PostgreSQL: the blob store every machine of a shared store reaches.

A ``store.BlobStore``, sibling of the directory's ``blobs.FileBlobStore``: the same digests,
stored encoding, program trees and checks on every read (``blobcodec``), kept in three
tables of the store's database, beside the event log::

    blobs(digest, size, stored_size, chunks)   one row per blob, written with its chunks
    blob_chunks(digest, seq, data)             the encoded blob in slices of CHUNK_BYTES
    program_trees(digest, tree)                program digest -> digest of its tree blob

A blob's header and chunks commit in one transaction, so a reader never sees
part of one; a put of a blob already stored (or being stored by another
transaction, which the primary key makes it wait for) does nothing. Chunks keep
each row far below PostgreSQL's 1 GB value limit and each round trip bounded
(a 256 MiB blob is 32 rows). The tables are append-only: a trigger refuses
UPDATE, DELETE and TRUNCATE, as the event log's does.

psycopg is imported with this module, which only ``location.open_store`` imports
when a ``postgresql://`` store is opened.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg

from evopolicygym.program import Program
from evopolicygym.records import blobcodec
from evopolicygym.records.blobcodec import (
    BlobCorrupt,
    BlobMissing,
    blob_digest,
    check_blob_size,
    check_digest,
    check_program,
    decode,
    encode,
    is_digest,
    program_blobs,
    rebuild_program,
)
from evopolicygym.records.store import StoreError

__all__ = ["CHUNK_BYTES", "SCHEMA", "PgBlobStore"]

CHUNK_BYTES = 8 * 1024 * 1024
_PAGE = 10_000
_TABLES = ("blobs", "blob_chunks", "program_trees")
_REMEMBERED = 100_000  # digests known stored, kept to skip their lookups
_T = TypeVar("_T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    digest text PRIMARY KEY CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    size bigint NOT NULL CHECK (size >= 0),
    stored_size bigint NOT NULL CHECK (stored_size >= 1),
    chunks integer NOT NULL CHECK (chunks >= 1)
);
CREATE TABLE IF NOT EXISTS blob_chunks (
    digest text NOT NULL REFERENCES blobs (digest),
    seq integer NOT NULL CHECK (seq >= 0),
    data bytea NOT NULL,
    PRIMARY KEY (digest, seq)
);
CREATE TABLE IF NOT EXISTS program_trees (
    digest text PRIMARY KEY CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    tree text NOT NULL REFERENCES blobs (digest)
);
CREATE OR REPLACE FUNCTION evopolicy_blobs_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'blobs are append-only: % on % refused', TG_OP, TG_TABLE_NAME;
END $$;
CREATE OR REPLACE TRIGGER blobs_append_only BEFORE UPDATE OR DELETE ON blobs
    FOR EACH ROW EXECUTE FUNCTION evopolicy_blobs_append_only();
CREATE OR REPLACE TRIGGER blobs_no_truncate BEFORE TRUNCATE ON blobs
    FOR EACH STATEMENT EXECUTE FUNCTION evopolicy_blobs_append_only();
CREATE OR REPLACE TRIGGER blob_chunks_append_only BEFORE UPDATE OR DELETE ON blob_chunks
    FOR EACH ROW EXECUTE FUNCTION evopolicy_blobs_append_only();
CREATE OR REPLACE TRIGGER blob_chunks_no_truncate BEFORE TRUNCATE ON blob_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION evopolicy_blobs_append_only();
CREATE OR REPLACE TRIGGER program_trees_append_only BEFORE UPDATE OR DELETE ON program_trees
    FOR EACH ROW EXECUTE FUNCTION evopolicy_blobs_append_only();
CREATE OR REPLACE TRIGGER program_trees_no_truncate BEFORE TRUNCATE ON program_trees
    FOR EACH STATEMENT EXECUTE FUNCTION evopolicy_blobs_append_only();
"""
# Two processes creating the schema at once would race on the catalog: serialize them.
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('evopolicygym.blobs.schema'))"


class PgBlobStore:
    """Content-addressed, immutable blobs in the PostgreSQL database at ``url`` (a
    ``store.BlobStore``). Safe for threads (one connection, used under a lock) and for
    processes forked with it open (a child opens its own connection)."""

    def __init__(self, url: str, *, create: bool = False, display: str | None = None) -> None:
        """``create``: make the tables if missing (else StoreError when they are);
        ``display``: how messages name the store (never with its password)."""
        self._url = url
        self._display = display if display is not None else "a PostgreSQL store"
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = os.getpid()
        self._stored: set[str] = set()  # digests seen stored: blobs are immutable
        if create:
            self._call(self._create)
        elif not self._call(self._exists):
            raise StoreError(
                f"no blob tables in {self._display} (create them with `evopolicy record create`)"
            )

    def __repr__(self) -> str:
        return f"PgBlobStore({self._display!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Sent to another process (a worker elsewhere): it connects on first use.
        return {"url": self._url, "display": self._display}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._url, self._display = state["url"], state["display"]
        self._lock = threading.Lock()
        self._conn = None
        self._pid = os.getpid()
        self._stored = set()

    # -- the connection ----------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._pid != os.getpid():
            # A forked child must not share its parent's socket: it opens its own.
            self._conn = psycopg.connect(self._url, autocommit=True)
            self._pid = os.getpid()
        return self._conn

    def _call(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """Run ``work`` on the connection; a dropped connection is reopened and ``work``
        retried once (every operation here is idempotent)."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    return work(self._connection())
                except psycopg.OperationalError as exc:
                    broken = self._conn is None or self._conn.closed or self._conn.broken
                    if attempt == 2 or not broken:
                        raise StoreError(f"blob store in {self._display}: {exc}") from exc
                    self._conn = None
                except psycopg.Error as exc:
                    raise StoreError(f"blob store in {self._display}: {exc}") from exc
            raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    @staticmethod
    def _create(conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(_SCHEMA_LOCK)
            conn.execute(SCHEMA)

    @staticmethod
    def _exists(conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT to_regclass('blobs') IS NOT NULL AND to_regclass('blob_chunks') IS NOT NULL "
            "AND to_regclass('program_trees') IS NOT NULL"
        ).fetchone()
        return bool(row and row[0])

    def integrity_problems(self) -> list[str]:
        """The blob tables' own state: their indexes valid and their append-only triggers in
        place and enabled (one disabled lets a blob be rewritten without a trace)."""

        def check(conn: psycopg.Connection[Any]) -> list[str]:
            problems = []
            for table in _TABLES:
                indexes = conn.execute(
                    "SELECT c.relname, i.indisvalid FROM pg_index i "
                    "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass",
                    (table,),
                ).fetchall()
                problems += [
                    f"blob index {name} is invalid" for name, valid in indexes if not valid
                ]
                triggers = dict(
                    conn.execute(
                        "SELECT tgname, tgenabled FROM pg_trigger "
                        "WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                        (table,),
                    ).fetchall()
                )
                for name in (f"{table}_append_only", f"{table}_no_truncate"):
                    state = triggers.get(name)
                    if state is None:
                        problems.append(f"trigger {name} is missing: {table} is not append-only")
                    elif state == "D":
                        problems.append(f"trigger {name} is disabled: {table} is not append-only")
            return problems

        try:
            return self._call(check)
        except StoreError as exc:
            return [f"the blob tables cannot be checked: {exc}"]

    # -- blobs -------------------------------------------------------------------------

    def _remember(self, digest: str) -> None:
        # Bounded: a long-lived Host stores many blobs; forgetting only costs a lookup.
        if len(self._stored) >= _REMEMBERED:
            self._stored.clear()
        self._stored.add(digest)

    def put(self, data: bytes) -> str:
        """Store ``data`` (if not already stored) and return its ``sha256:<hex>`` digest."""
        data = bytes(data)
        check_blob_size(len(data))
        digest = blob_digest(data)
        if digest in self._stored:
            return digest
        # A large blob already stored is not compressed again; a small one's check is its insert.
        if len(data) > CHUNK_BYTES and self.has(digest):
            self._remember(digest)
            return digest
        stored = encode(data)
        chunks = [stored[i : i + CHUNK_BYTES] for i in range(0, len(stored), CHUNK_BYTES)]

        def write_one(conn: psycopg.Connection[Any]) -> None:
            # One round trip (one statement, its own transaction): header and chunk together.
            conn.execute(
                "WITH header AS (INSERT INTO blobs (digest, size, stored_size, chunks) "
                "VALUES (%s, %s, %s, 1) ON CONFLICT (digest) DO NOTHING RETURNING digest) "
                "INSERT INTO blob_chunks (digest, seq, data) SELECT digest, 0, %s FROM header",
                (digest, len(data), len(stored), stored),
            )

        def write(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                # Another writer of the same blob holds the key until it commits; then this
                # inserts nothing (same digest, same bytes), and the chunks are theirs.
                header = conn.execute(
                    "INSERT INTO blobs (digest, size, stored_size, chunks) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (digest) DO NOTHING",
                    (digest, len(data), len(stored), len(chunks)),
                )
                if header.rowcount == 1:
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            "INSERT INTO blob_chunks (digest, seq, data) VALUES (%s, %s, %s)",
                            [(digest, seq, chunk) for seq, chunk in enumerate(chunks)],
                        )

        self._call(write_one if len(chunks) == 1 else write)
        self._remember(digest)
        return digest

    def put_many(self, items: list[bytes]) -> list[str]:
        """Store each of ``items`` (as ``put``) and return their digests, in order."""
        return [self.put(item) for item in items]

    def get(self, digest: str) -> bytes:
        """The blob's bytes, checked against its digest."""
        return decode(digest, self._read(digest))

    def verify(self, digest: str) -> None:
        """Raise ``BlobMissing`` or ``BlobCorrupt`` unless the blob reads back intact."""
        self.get(digest)

    def stored_size(self, digest: str) -> int:
        """Bytes the blob takes as stored (its encoded form, all chunks)."""
        check_digest(digest)

        def read(conn: psycopg.Connection[Any]) -> int | None:
            row = conn.execute(
                "SELECT stored_size FROM blobs WHERE digest = %s", (digest,)
            ).fetchone()
            return None if row is None else int(row[0])

        size = self._call(read)
        if size is None:
            raise BlobMissing(digest)
        return size

    def _read(self, digest: str) -> bytes:
        check_digest(digest)

        def read(conn: psycopg.Connection[Any]) -> bytes:
            # One statement (one snapshot, one round trip); binary: bytea as it is, not hex.
            rows = conn.execute(
                "SELECT b.stored_size, b.chunks, c.seq, c.data FROM blobs b "
                "LEFT JOIN blob_chunks c ON c.digest = b.digest WHERE b.digest = %s ORDER BY c.seq",
                (digest,),
                binary=True,
            ).fetchall()
            if not rows:
                raise BlobMissing(digest)
            stored_size, count = int(rows[0][0]), int(rows[0][1])
            if stored_size > blobcodec.MAX_BLOB_BYTES + 1:
                raise BlobCorrupt(digest, f"row holds {stored_size} bytes, more than any blob")
            seqs = [row[2] for row in rows if row[2] is not None]
            if seqs != list(range(count)):
                raise BlobCorrupt(digest, f"holds chunks {_ranges(seqs)} of {count}")
            stored = b"".join(bytes(row[3]) for row in rows)
            if len(stored) != stored_size:
                raise BlobCorrupt(
                    digest, f"chunks hold {len(stored)} bytes, header says {stored_size}"
                )
            return stored

        return self._call(read)

    def has(self, digest: str) -> bool:
        check_digest(digest)
        if digest in self._stored:
            return True
        row = self._call(
            lambda conn: conn.execute("SELECT 1 FROM blobs WHERE digest = %s", (digest,)).fetchone()
        )
        return row is not None

    def size(self, digest: str) -> int:
        """Uncompressed size, from the blob's header row (content unchecked)."""
        check_digest(digest)
        row = self._call(
            lambda conn: conn.execute(
                "SELECT size FROM blobs WHERE digest = %s", (digest,)
            ).fetchone()
        )
        if row is None:
            raise BlobMissing(digest)
        return int(row[0])

    def digests(self) -> Iterator[str]:
        """Digests of all stored blobs, in sorted order (read a page at a time)."""
        return self._keys("blobs")

    def _keys(self, table: str) -> Iterator[str]:
        after = ""
        while True:
            rows = self._call(functools.partial(_page, table, after))
            for row in rows:
                yield str(row[0])
            if len(rows) < _PAGE:
                return
            after = str(rows[-1][0])

    # -- programs ----------------------------------------------------------------------

    def put_program(self, program: Program) -> str:
        """Store each file and the program's tree as blobs; return ``program.digest``."""
        check_program(program)
        if self.has_program(program.digest):
            return program.digest
        tree_digest = self.put_many(program_blobs(program))[-1]
        # Recorded last: a program's mapping implies its tree and every file blob are stored.
        self._record_program(program.digest, tree_digest)
        return program.digest

    def get_program(self, digest: str) -> Program:
        """Rebuild the program from its tree; ``BlobCorrupt`` unless it has digest ``digest``."""
        return rebuild_program(digest, self.program_tree(digest), self.get)

    def has_program(self, digest: str) -> bool:
        check_digest(digest)
        row = self._call(
            lambda conn: conn.execute(
                "SELECT 1 FROM program_trees WHERE digest = %s", (digest,)
            ).fetchone()
        )
        return row is not None

    def _record_program(self, digest: str, tree_digest: str) -> None:
        self._call(
            lambda conn: conn.execute(
                "INSERT INTO program_trees (digest, tree) VALUES (%s, %s) "
                "ON CONFLICT (digest) DO NOTHING",
                (digest, tree_digest),
            )
        )

    def program_tree(self, digest: str) -> str:
        """Digest of the tree blob recorded for program ``digest``."""
        check_digest(digest)
        row = self._call(
            lambda conn: conn.execute(
                "SELECT tree FROM program_trees WHERE digest = %s", (digest,)
            ).fetchone()
        )
        if row is None:
            raise BlobMissing(digest, "program")
        text = str(row[0])
        if not is_digest(text):
            raise BlobCorrupt(digest, f"tree reference {text[:80]!r} is not a digest", "program")
        return text

    def program_digests(self) -> Iterator[str]:
        """Digests of all stored programs, in sorted order."""
        return self._keys("program_trees")


def _page(table: str, after: str, conn: psycopg.Connection[Any]) -> list[Any]:
    query = f"SELECT digest FROM {table} WHERE digest > %s ORDER BY digest LIMIT %s"
    return conn.execute(query, (after, _PAGE)).fetchall()


def _ranges(seqs: list[int]) -> str:
    return (
        "none"
        if not seqs
        else ", ".join(str(seq) for seq in seqs[:8]) + (", ..." if len(seqs) > 8 else "")
    )

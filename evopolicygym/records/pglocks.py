"""Run locks every machine sees: PostgreSQL session advisory locks on a store's database.

A directory store's Run lock is a file lock (``run.liveness``), which only the machine
holding the file sees. Over a shared PostgreSQL store a Host on another machine must be
seen too: ``run_lock`` holds ``pg_advisory_lock`` on a key derived from the Run id, on a
connection of its own, for as long as the Host carries the Run. The server drops it when
that connection ends, however the Host dies (a killed process's socket is closed by its
kernel; a lost machine's by the server's TCP keepalive). ``held`` asks whether anyone
holds it now.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import psycopg

from evopolicygym.records.store import StoreError

__all__ = ["LockHeld", "held", "lock_key", "run_lock"]

_DOMAIN = b"evopolicygym.run-lock/1\0"
# A dead machine's session is noticed by keepalives: idle 30 s, then 3 probes 10 s apart.
_KEEPALIVE = {
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
}
_probes: dict[str, tuple[int, psycopg.Connection[Any]]] = {}
_probes_lock = threading.Lock()


class LockHeld(StoreError):
    """Another session holds this Run's lock."""


def lock_key(run_id: str) -> int:
    """The advisory lock key of ``run_id``: 64 bits of a domain-separated SHA-256."""
    return int.from_bytes(
        hashlib.sha256(_DOMAIN + run_id.encode()).digest()[:8], "big", signed=True
    )


@contextlib.contextmanager
def run_lock(url: str, run_id: str) -> Iterator[None]:
    """Hold the Run's lock on the database at ``url``; ``LockHeld`` if another session does."""
    try:
        connection = psycopg.connect(_with_keepalives(url), autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot take the lock of run {run_id}: {str(exc).strip()}") from None
    try:
        row = connection.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(run_id),)).fetchone()
        if not (row and row[0]):
            raise LockHeld(f"run {run_id} is being carried by another process")
        try:
            yield
        finally:
            # Released here, not only by closing: the server ends a closed session a moment
            # later, and the lock must be free when this returns.
            with contextlib.suppress(psycopg.Error):
                connection.execute("SELECT pg_advisory_unlock(%s)", (lock_key(run_id),))
    finally:
        connection.close()  # ends the session, and with it the lock whatever happened


def _with_keepalives(url: str) -> str:
    """``url`` with libpq's keepalive settings added (a URL's own win: they come after)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(url)
    return make_conninfo(url, **{k: v for k, v in _KEEPALIVE.items() if k not in given})


def held(url: str, run_id: str) -> bool:
    """Whether some session holds the Run's lock now (this process's own included)."""
    key = lock_key(run_id) & 0xFFFFFFFFFFFFFFFF
    query = (
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND classid = %s::oid AND objid = %s::oid AND objsubid = 1)"
    )
    args = (key >> 32, key & 0xFFFFFFFF)
    with _probes_lock:
        for attempt in (1, 2):
            pid, connection = _probes.get(url, (0, None))
            if connection is None or connection.closed or pid != os.getpid():
                try:
                    connection = psycopg.connect(url, autocommit=True)
                except psycopg.Error as exc:
                    raise StoreError(
                        f"cannot tell whether run {run_id} is carried: {str(exc).strip()}"
                    ) from None
                _probes[url] = (os.getpid(), connection)
            try:
                row = connection.execute(query, args).fetchone()
                return bool(row and row[0])
            except psycopg.OperationalError:
                _probes.pop(url, None)
                if attempt == 2:
                    raise
    raise AssertionError("unreachable")

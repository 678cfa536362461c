"""Whether a Host is carrying a Run: an exclusive lock held for as long as it does.

A Run without RunFinished whose lock nobody holds is one whose Host died: it shows
as ``interrupted`` until ``evopolicy resume`` carries it on. The kernel releases
the lock when the process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from evopolicygym.records.location import Store

__all__ = ["RunBusy", "host_alive", "run_lock"]


class RunBusy(Exception):
    """Another Host is carrying this Run."""


def _lock_path(store: Store, run_id: str) -> Path:
    return store.path / "runs" / f"{run_id}.lock"


@contextlib.contextmanager
def run_lock(store: Store, run_id: str) -> Iterator[None]:
    """Hold the Run's lock; RunBusy if another Host holds it."""
    if store.url is not None:  # a store many machines share: a lock in its database
        from evopolicygym.records import pglocks

        with contextlib.ExitStack() as held:
            try:
                held.enter_context(pglocks.run_lock(store.url.url, run_id))
            except pglocks.LockHeld as exc:
                raise RunBusy(str(exc)) from None
            yield
        return
    path = _lock_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"run {run_id} is being carried by another process") from None
        yield
    finally:
        os.close(fd)


def host_alive(store: Store, run_id: str) -> bool:
    """Whether a Host holds the Run's lock now."""
    if store.url is not None:
        from evopolicygym.records import pglocks

        return pglocks.held(store.url.url, run_id)
    try:
        fd = os.open(_lock_path(store, run_id), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False

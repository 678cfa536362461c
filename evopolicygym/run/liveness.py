"""Whether a Host is carrying a Run: an exclusive lock held for as long as it does.

A Run without RunFinished whose lock nobody holds is one whose Host died: it shows
as ``interrupted`` until ``evopolicy resume`` carries it on. The kernel releases
the lock when the process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from evopolicygym.records.location import Store

__all__ = ["RunBusy", "exclusive", "host_alive", "run_lock"]


class RunBusy(Exception):
    """Another Host is carrying this Run."""


def _lock_path(store: Store, run_id: str) -> Path:
    return store.path / "runs" / f"{run_id}.lock"


@contextlib.contextmanager
def exclusive(store: Store, file: Path, key: str, busy: Callable[[], Exception]) -> Iterator[None]:
    """Hold one process's exclusive lock for as long as the block runs; ``busy()`` is raised if
    another holds it. Over a store many machines share, the lock is in its database (named by
    ``key``), else a file lock on ``file``; either is dropped when the holder dies, however."""
    if store.url is not None:
        from evopolicygym.records import pglocks

        with contextlib.ExitStack() as held:
            try:
                held.enter_context(pglocks.run_lock(store.url.url, key))
            except pglocks.LockHeld:
                raise busy() from None
            yield
        return
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy() from None
        yield
    finally:
        os.close(fd)


def run_lock(store: Store, run_id: str) -> contextlib.AbstractContextManager[None]:
    """Hold the Run's lock; RunBusy if another Host holds it."""
    return exclusive(
        store,
        _lock_path(store, run_id),
        run_id,
        lambda: RunBusy(f"run {run_id} is being carried by another process"),
    )


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

"""Private temporary directories of the Host, swept when their Host process is gone.

A directory is named ``<prefix><host pid>-<random>``: a SIGKILLed Host cannot remove
its own, so the next Host that makes one of the same kind removes those whose process
no longer exists (pids of live processes, ours or another user's, are left alone).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from typing import Any

__all__ = ["host_base", "private_dir", "remove_tree"]

# Short: the fork server's socket path in it must stay under AF_UNIX's 108 bytes even in
# a long TMPDIR. No "-" before the pid: "evopolicy-<digits>" is a workspace's name.
_BASE_PREFIX = "evopolicy-h"
_bases: dict[int, str] = {}  # by pid: a forked child makes its own


def _sweep(prefix: str, base: str) -> None:
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            if not name.startswith(prefix):
                continue
            owner = name[len(prefix) :].split("-", 1)[0]
            if not owner.isdigit():
                continue
            try:
                os.kill(int(owner), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
            except OSError:
                continue  # alive, owned by someone else


def remove_tree(path: str | os.PathLike[str]) -> None:
    """rmtree that first gives back write bits taken away (by the Host's read-only program
    copies, or by an Agent in its workspace), which a non-root Host needs."""

    def retry(function: Any, name: str, _exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
            function(name)

    shutil.rmtree(path, onerror=retry)


def host_base() -> str:
    """This process's one directory for its private channels and scratch (the fork server's
    socket among them), made on first use and removed at exit. The Agent's jail hides it
    whole, so what the Host makes in it later stays out of the Agent's reach too."""
    pid = os.getpid()
    if pid not in _bases:
        base = tempfile.gettempdir()
        _sweep(_BASE_PREFIX, base)
        _bases[pid] = tempfile.mkdtemp(prefix=f"{_BASE_PREFIX}{pid}-", dir=base)
        os.chmod(_bases[pid], 0o700)
        atexit.register(_remove_base, pid)
    return _bases[pid]


def _remove_base(pid: int) -> None:
    if os.getpid() == pid and pid in _bases:
        with contextlib.suppress(OSError):
            remove_tree(_bases.pop(pid))


def private_dir(prefix: str, base: str | None = None) -> str:
    """A new directory (mode 0700) named for this process, after sweeping abandoned ones:
    in ``base``, by default this process's ``host_base()``."""
    base = base or host_base()
    _sweep(prefix, base)
    directory = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base)
    os.chmod(directory, 0o700)
    return directory

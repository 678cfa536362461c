"""Private temporary directories of the Host, swept when their Host process is gone.

A directory is named ``<prefix><host pid>-<random>``: a SIGKILLed Host cannot remove
its own, so the next Host that makes one of the same kind removes those whose process
no longer exists (pids of live processes, ours or another user's, are left alone).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any

__all__ = ["private_dir", "remove_tree"]


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


def private_dir(prefix: str, base: str | None = None) -> str:
    """A new directory (mode 0700) named for this process, after sweeping abandoned ones."""
    base = base or tempfile.gettempdir()
    _sweep(prefix, base)
    directory = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base)
    os.chmod(directory, 0o700)
    return directory

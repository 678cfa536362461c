"""Start long-lived helper processes from one thread that lives as long as the Host.

Linux delivers PR_SET_PDEATHSIG when the *thread* that forked the child exits,
not the process. The fork server and the runners ask to die with their parent,
so a process started from a short-lived thread (a session handler, a worker
pool) would be killed as soon as that thread ended. Starting them all from one
daemon thread ties their lives to the Host process, as intended.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["spawn"]

T = TypeVar("T")

_requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()


def _serve() -> None:
    while True:
        fn, future = _requests.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the caller, who re-raises it
            future.set_exception(exc)


def spawn(fn: Callable[[], T]) -> T:
    """Run ``fn`` (which starts a child process) on the spawner thread; return its result."""
    global _thread
    if threading.current_thread() is _thread:
        return fn()
    with _start_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="evopolicy-spawner", daemon=True)
            _thread.start()
    future: Future[T] = Future()
    _requests.put((fn, future))
    return future.result()

"""One way for a long command to stop on SIGINT or SIGTERM: the first signal raises
KeyboardInterrupt once (after ``on_stop``, and after stopping the evaluations under way),
later ones are ignored while the command unwinds, and logging is quiet meanwhile, so the
user sees the command's one line and no traceback."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "interruptible"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, for SIGTERM too: the command was stopped, not wrong


@contextlib.contextmanager
def interruptible(on_stop: Callable[[], None] | None = None) -> Iterator[None]:
    def interrupt(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        logging.disable(logging.CRITICAL)
        if on_stop is not None:
            on_stop()
        # Evaluations under way in other threads (a Run's Submission, served to its Agent)
        # end now too, rather than run to their end while the command waits for them.
        engine = sys.modules.get("evopolicygym.evaluation.engine")
        if engine is not None:
            engine.stop_all()
        raise KeyboardInterrupt

    # Found once before a signal can cut it short: finding it creates and removes a probe
    # file there, which a KeyboardInterrupt between the two would leave behind.
    tempfile.gettempdir()
    previous = {
        signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        logging.disable(logging.NOTSET)

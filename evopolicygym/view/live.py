"""Open pages follow the store: a watcher polls the log's head and the pages listen.

One task per server polls the head (one small query, in a worker thread) every
``poll_s`` seconds; when it moved, the Run index catches up and every listener learns
which Runs changed. A page listens on ``/live`` (server-sent events): the list for any Run,
a Run's page for its own (``?run=ID``). The message carries only the new head; the page's
script fetches the page again and swaps the parts marked live. Other processes record,
SQLite or PostgreSQL alike: only the log tells the viewer anything.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable

import anyio.to_thread

__all__ = ["KEEPALIVE_S", "Watcher"]

log = logging.getLogger(__name__)
KEEPALIVE_S = 15.0  # a comment line this often keeps proxies and the browser from giving up


class Watcher:
    """Polls ``refresh`` (the index's: head reached, Runs changed) and tells listeners."""

    def __init__(self, refresh: Callable[[], tuple[int, set[str]]], poll_s: float) -> None:
        self._refresh = refresh
        self.poll_s = poll_s
        self.head = 0
        self.error: str | None = None  # why the last poll failed (the store went away)
        self._touched: dict[str, int] = {}  # Run id -> the head at which it last changed
        self._event = asyncio.Event()
        self._closing = False

    async def run(self) -> None:
        """Poll until ``close``; a failed poll is logged and tried again."""
        while not self._closing:
            try:
                head, changed = await anyio.to_thread.run_sync(self._refresh)
                self.error = None
            except Exception as exc:  # a store that cannot be read now may be readable later
                if self.error is None:
                    log.warning("cannot read the store: %s", exc)
                self.error = f"{type(exc).__name__}: {exc}"
                head, changed = self.head, set()
            if head != self.head:
                self.head = head
                for run_id in changed:
                    self._touched[run_id] = head
                event, self._event = self._event, asyncio.Event()
                event.set()
            await asyncio.sleep(self.poll_s)

    def close(self) -> None:
        self._closing = True
        self._event.set()

    async def messages(self, run_id: str | None) -> AsyncIterator[str]:
        """Server-sent events for one listener: the head now, then each move of it that
        concerns ``run_id`` (any Run, if None), and a keep-alive comment now and then."""
        yield "retry: 2000\n\n"
        seen = self.head
        yield _message(seen)
        while not self._closing:
            event = self._event  # taken before comparing: a move after this sets it
            moved = self.head if run_id is None else self._touched.get(run_id, 0)
            if moved > seen:
                seen = self.head
                yield _message(seen)
                continue
            try:
                await asyncio.wait_for(event.wait(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keep-alive\n\n"


def _message(head: int) -> str:
    return f"event: head\ndata: {json.dumps({'head': head})}\n\n"

"""Host-private values of a Run (pool and policy seeds, seed domains, the Run seed,
scenario strings), collected to scrub them from recorded free text before it is shown
or exported: an error message can quote an Episode's seed or scenario.

The pool is read from its blob (``records.pools``) when a blob store is given; when it
cannot be read, its values are unknown and every number long enough to be one of them
is scrubbed instead (fail closed; its scenario strings cannot be)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from evopolicygym.records.events import PoolEntry, RunCreated
from evopolicygym.records.pools import PoolError, RecordedPool
from evopolicygym.records.store import BlobStore

__all__ = ["REDACTED", "PrivateValues"]

_NUMBER = re.compile(r"\d+")
_MIN_PRIVATE_DIGITS = 5  # shorter numbers are everywhere in text; scrubbing them would garble it
REDACTED = "<private>"
_HEAD = 6  # the shortest private string's length: the key strings are indexed by
_INDEX_FROM = 64  # from this many strings on, find which occur in one pass over the text


class PrivateValues:
    """Host-private numbers and scenario strings seen so far, to scrub from recorded text."""

    def __init__(self) -> None:
        self.numbers: set[str] = set()
        self.strings: set[str] = set()
        self.unknown = False  # some private values could not be read: scrub every long number
        self._heads: set[str] | None = None  # the strings' first characters
        self._lengths: list[int] = []  # the strings' lengths, ascending
        self._indexed = 0  # how many strings _heads and _lengths were taken from

    def add_created(self, created: RunCreated, blobs: BlobStore | None = None) -> None:
        """The values ``created`` holds; its pool, when kept as a blob, read from ``blobs``."""
        if created.pool_blob is None:
            self._entries(created.pool)
        elif blobs is None:
            self.unknown = True
        else:
            try:
                self._entries(RecordedPool.of(created, blobs))
            except PoolError:
                self.unknown = True
        for derived in created.seeds.values():
            self._number(derived)
        run_seed = created.config.get("seed")
        if isinstance(run_seed, int):
            self._number(run_seed)

    def _entries(self, entries: Iterable[PoolEntry]) -> None:
        for entry in entries:
            self._number(entry.seed)
            self._number(entry.policy_seed)
            self._scenario(entry.scenario)

    def _number(self, value: int) -> None:
        text = str(abs(value))
        if len(text) >= _MIN_PRIVATE_DIGITS:
            self.numbers.add(text)

    def _scenario(self, value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                self._scenario(item)
        elif isinstance(value, list):
            for item in value:
                self._scenario(item)
        elif isinstance(value, bool):
            return
        elif isinstance(value, int):
            self._number(value)
        elif isinstance(value, str) and len(value) >= _HEAD:
            self.strings.add(value)

    def _present(self, text: str) -> Iterable[str]:
        """The strings that may occur in ``text``: all of them when they are few; else the
        ones that do, found in one pass over the text (a Run of 100,000 Episodes has as many
        scenario strings: searching the text for each took seconds a page). A position is
        looked at only where some string's first characters stand, then for each length."""
        if len(self.strings) < _INDEX_FROM:
            return self.strings
        if self._heads is None or self._indexed != len(self.strings):
            self._heads = {secret[:_HEAD] for secret in self.strings}
            self._lengths = sorted({len(secret) for secret in self.strings})
            self._indexed = len(self.strings)
        heads, lengths, strings = self._heads, self._lengths, self.strings
        found: set[str] = set()
        for start in range(len(text) - _HEAD + 1):
            if text[start : start + _HEAD] in heads:
                for length in lengths:
                    piece = text[start : start + length]
                    if len(piece) < length:
                        break
                    if piece in strings:
                        found.add(piece)
        return found

    def scrub(self, text: str) -> str:
        # Longest first, so a secret inside a longer one does not leave the longer's rest.
        for secret in sorted(self._present(text), key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        if self.unknown:
            return _NUMBER.sub(
                lambda m: (
                    REDACTED if len(m.group().lstrip("0")) >= _MIN_PRIVATE_DIGITS else m.group()
                ),
                text,
            )
        if not self.numbers:
            return text
        return _NUMBER.sub(
            lambda m: REDACTED if m.group().lstrip("0") in self.numbers else m.group(), text
        )

    @classmethod
    def of(cls, created: RunCreated, blobs: BlobStore | None = None) -> PrivateValues:
        private = cls()
        private.add_created(created, blobs)
        return private

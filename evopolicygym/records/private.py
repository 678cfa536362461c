"""Host-private values of a Run (pool and policy seeds, seed domains, the Run seed,
scenario strings), collected to scrub them from recorded free text before it is shown
or exported: an error message can quote an Episode's seed or scenario."""

from __future__ import annotations

import re
from typing import Any

from evopolicygym.records.events import RunCreated

__all__ = ["REDACTED", "PrivateValues"]

_NUMBER = re.compile(r"\d+")
_MIN_PRIVATE_DIGITS = 5  # shorter numbers are everywhere in text; scrubbing them would garble it
REDACTED = "<private>"


class PrivateValues:
    """Host-private numbers and scenario strings seen so far, to scrub from recorded text."""

    def __init__(self) -> None:
        self.numbers: set[str] = set()
        self.strings: set[str] = set()

    def add_created(self, created: RunCreated) -> None:
        for entry in created.pool:
            self._number(entry.seed)
            self._number(entry.policy_seed)
            self._scenario(entry.scenario)
        for derived in created.seeds.values():
            self._number(derived)
        run_seed = created.config.get("seed")
        if isinstance(run_seed, int):
            self._number(run_seed)

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
        elif isinstance(value, str) and len(value) >= 6:
            self.strings.add(value)

    def scrub(self, text: str) -> str:
        for secret in self.strings:
            text = text.replace(secret, REDACTED)
        if not self.numbers:
            return text
        return _NUMBER.sub(
            lambda m: REDACTED if m.group().lstrip("0") in self.numbers else m.group(), text
        )

    @classmethod
    def of(cls, created: RunCreated) -> PrivateValues:
        private = cls()
        private.add_created(created)
        return private

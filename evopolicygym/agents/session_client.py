"""The session as the built-in agents call it: the ``evopolicy session`` command line.

Both built-in agents submit and finish by running ``evopolicy session submit`` and
``evopolicy session finish`` through the command line the Host puts in ``$EVOPOLICY_CLI``
(``protocol.CLI_ENV``, a JSON list), as any agent would: their transcripts then show the
commands an external agent runs. The command prints its JSON reply on stdout and exits 0,
prints a rejection ``{"error": {"code", "message"}}`` on stderr and exits 1, or fails as a
client (exit 2, or it cannot run at all).

This module owns reading ``$EVOPOLICY_CLI``, the command lines, what a result means
(``SessionResult``: the reply, a ``Rejected`` or a ``SessionUnavailable``), and the
ranking of published Submissions an agent finishes with when it has nothing better.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evopolicygym.agents.text import json_object
from evopolicygym.protocol import CLI_ENV

__all__ = [
    "DEFAULT_CLI",
    "Published",
    "Rejected",
    "Runner",
    "SessionClient",
    "SessionResult",
    "SessionUnavailable",
    "cli_from_env",
    "rank_published",
]

DEFAULT_CLI = ("evopolicy",)

# Runs a command line: (the command as a transcript shows it, argv) -> (exit status, stdout,
# stderr). The reference agent's is its recorded ``bash`` tool.
Runner = Callable[[list[str], list[str]], tuple[int, str, str]]


class Rejected(Exception):
    """The Host refused a request; ``code`` is its rejection code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class SessionUnavailable(Exception):
    """The session command could not run or answered with a client error (exit 2)."""


def cli_from_env(agent: str) -> list[str]:
    """The command line in ``$EVOPOLICY_CLI``; ``evopolicy`` when it is unset or unusable
    (said on stderr, naming ``agent``)."""
    try:
        cli = json.loads(os.environ.get(CLI_ENV) or json.dumps(DEFAULT_CLI))
        if not isinstance(cli, list) or not cli or not all(isinstance(a, str) for a in cli):
            raise ValueError("not a non-empty list of strings")
    except ValueError as exc:
        print(f"{agent}: {CLI_ENV} is unusable ({exc}); using evopolicy", file=sys.stderr)
        return list(DEFAULT_CLI)
    return cli


@dataclass(frozen=True)
class SessionResult:
    """What one ``evopolicy session`` command did: its exit status and output."""

    code: int
    out: str
    err: str

    @property
    def reply(self) -> dict[str, Any] | None:
        """The JSON reply of an accepted request (exit 0)."""
        return json_object(self.out) if self.code == 0 else None

    @property
    def rejection(self) -> Rejected | None:
        """The Host's refusal (exit 1), read from the error on stderr."""
        if self.code != 1:
            return None
        error = (json_object(self.err) or {}).get("error") or {}
        return Rejected(
            str(error.get("code", "unknown")), str(error.get("message", self.err.strip()))
        )

    def accepted(self) -> dict[str, Any]:
        """The reply (empty when it is not JSON); raises ``Rejected`` when the Host refused
        and ``SessionUnavailable`` when the command failed."""
        rejected = self.rejection
        if rejected is not None:
            raise rejected
        if self.code != 0:
            raise SessionUnavailable(self.err.strip() or f"exit code {self.code}")
        return self.reply or {}


class SessionClient:
    """``evopolicy session`` through ``cli``, run in ``cwd`` (or by ``run``, when given)."""

    def __init__(self, cli: Sequence[str], cwd: Path, run: Runner | None = None) -> None:
        self.cli = list(cli)
        self.cwd = cwd
        self.run = run or self._run

    def submit(self, directory: str, episodes: str) -> SessionResult:
        return self.call("submit", directory, "--episodes", episodes)

    def finish(self, ids: Iterable[int]) -> SessionResult:
        return self.call("finish", *(str(i) for i in ids))

    def call(self, *args: str) -> SessionResult:
        return SessionResult(
            *self.run(["evopolicy", "session", *args], [*self.cli, "session", *args])
        )

    def _run(self, _shown: list[str], argv: list[str]) -> tuple[int, str, str]:
        try:
            done = subprocess.run(
                argv, cwd=self.cwd, stdin=subprocess.DEVNULL, capture_output=True, check=False
            )
        except OSError as exc:
            raise SessionUnavailable(
                f"the session command could not run: {exc.strerror or exc}"
            ) from exc
        return (
            done.returncode,
            done.stdout.decode("utf-8", errors="replace"),
            done.stderr.decode("utf-8", errors="replace"),
        )


@dataclass
class Published:
    """A published Submission as an agent learnt of it (from its feedback or the reply)."""

    submission_id: int
    score: float | None
    failures: int
    digest: str | None


def rank_published(published: Iterable[Published], maximize: bool, limit: int) -> list[int]:
    """The ids of the best scored Submissions, best first (ties: fewer failures, then the
    earlier), one per program, at most ``limit``: what an agent finishes with when its own
    search left it nothing better."""
    scored = [p for p in published if p.score is not None]
    sign = -1.0 if maximize else 1.0
    scored.sort(key=lambda p: (sign * (p.score or 0.0), p.failures, p.submission_id))
    ids: list[int] = []
    digests: set[str] = set()
    for p in scored:
        if p.digest is not None:
            if p.digest in digests:
                continue
            digests.add(p.digest)
        ids.append(p.submission_id)
    return ids[:limit]

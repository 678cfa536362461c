"""The session as the built-in agents call it: the ``evopolicy session`` command line.

Both built-in agents submit and finish by running ``evopolicy session submit`` and
``evopolicy session finish`` through the command line the Host puts in ``$EVOPOLICY_CLI``
(``protocol.CLI_ENV``, a JSON list), as any agent would: their transcripts then show the
commands an external agent runs. The command prints its JSON reply on stdout and exits 0,
prints a rejection ``{"error": {"code", "message"}}`` on stderr and exits 1, or fails as a
client (exit 2, or it cannot run at all).

This module owns reading ``$EVOPOLICY_CLI``, the command lines, what a result means
(``SessionResult``: the reply, a ``Rejected`` or a ``SessionUnavailable``), and the
ranking of programs on matched evidence that an agent finishes with (``rank_published``).
"""

from __future__ import annotations

import json
import math
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
    "RankedProgram",
    "Rejected",
    "Runner",
    "SessionClient",
    "SessionResult",
    "SessionUnavailable",
    "cli_from_env",
    "handoff",
    "rank_programs",
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

    def submit(self, directory: str, episodes: str, parent: int | None = None) -> SessionResult:
        """Submit ``directory`` on ``episodes``; ``parent``: the Submission it was edited from
        (0: the initial program), which the Host records as its parent."""
        stated = () if parent is None else ("--parent", str(parent))
        return self.call("submit", directory, "--episodes", episodes, *stated)

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
    """A published Submission as an agent learnt of it (from its feedback or the reply):
    ``indices`` are the pool indices it ran on, when known."""

    submission_id: int
    score: float | None
    failures: int
    digest: str | None
    indices: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RankedProgram:
    """One program of a ranking, with the Submission that names it and how it was judged:
    on the matched set (``matched``; ``score`` is its score there) or, when it never ran
    there, on its own Episodes. ``worst``: the score is no better than the failure score."""

    digest: str | None
    submission_id: int
    score: float
    failures: int
    matched: bool
    worst: bool


def rank_programs(
    published: Iterable[Published],
    maximize: bool,
    *,
    matched: Sequence[int] | None = None,
    failure_score: float | None = None,
) -> list[RankedProgram]:
    """The scored programs of ``published`` (one per digest), best first, on matched evidence.

    ``matched`` is the set of pool indices every candidate ran on (by default the index set
    the most programs share, when at least two do). Programs that ran on it come first,
    ordered by their score there, then fewer failures, then the earlier Submission; the
    leaders that share all their evidence (the matched set and the same re-evaluations) are
    ordered on all of it. Programs that never ran on it come next, by their score over their
    own Episodes (unmatched evidence). A program no better than ``failure_score`` (the worst
    any Episode can score) comes after every better one, matched or not; failed evaluations
    (no score) are left out.
    """
    sign = -1.0 if maximize else 1.0
    groups: dict[object, list[Published]] = {}
    for p in published:
        if p.score is not None and math.isfinite(p.score):
            groups.setdefault(p.digest or ("submission", p.submission_id), []).append(p)
    target = tuple(matched) if matched is not None else _shared_indices(groups.values())
    ranked: list[tuple[tuple[int, float, int, int], RankedProgram, list[Published]]] = []
    for subs in groups.values():
        on_target = [p for p in subs if target is not None and p.indices == target]
        judged = on_target or subs
        head = judged[0]
        score = _pooled(judged)
        failures = head.failures if on_target else sum(p.failures for p in subs)
        worst = failure_score is not None and sign * score >= sign * failure_score
        program = RankedProgram(
            head.digest, head.submission_id, score, failures, bool(on_target), worst
        )
        tier = (2 if worst else 0) + (0 if on_target else 1)
        ranked.append(((tier, sign * score, failures, head.submission_id), program, subs))
    ranked.sort(key=lambda entry: entry[0])
    # Leaders re-evaluated on the same fresh Episodes compare on all their Episodes.
    evidence = [frozenset(p.indices for p in subs) for _, _, subs in ranked]
    lead = 0
    while (
        lead < len(ranked)
        and ranked[lead][1].matched
        and not ranked[lead][1].worst
        and len(evidence[0]) > 1
        and None not in evidence[0]
        and evidence[lead] == evidence[0]
    ):
        lead += 1
    if lead > 1:
        ranked[:lead] = sorted(
            ranked[:lead],
            key=lambda entry: (sign * _pooled(entry[2]), sum(p.failures for p in entry[2])),
        )
    return [program for _, program, _ in ranked]


def _pooled(subs: Sequence[Published]) -> float:
    """The mean score over the Submissions' Episodes (each weighs its Episode count)."""
    weights = [len(p.indices) if p.indices else 1 for p in subs]
    return sum((p.score or 0.0) * w for p, w in zip(subs, weights, strict=True)) / sum(weights)


def _shared_indices(groups: Iterable[list[Published]]) -> tuple[int, ...] | None:
    """The index set the most programs ran on, when at least two did (the earliest wins a tie)."""
    programs: dict[tuple[int, ...], int] = {}
    for subs in groups:
        for indices in dict.fromkeys(p.indices for p in subs if p.indices is not None):
            programs[indices] = programs.get(indices, 0) + 1
    best = max(programs.values(), default=0)
    return next((i for i, n in programs.items() if n == best), None) if best >= 2 else None


def handoff(ranked: Sequence[RankedProgram], limit: int) -> list[RankedProgram]:
    """The programs to finish with, best first: at most ``limit``, none no better than a
    failure while a better one exists."""
    kept = [r for r in ranked if not r.worst] or list(ranked)
    return kept[:limit]


def rank_published(
    published: Iterable[Published],
    maximize: bool,
    limit: int,
    *,
    matched: Sequence[int] | None = None,
    failure_score: float | None = None,
) -> list[int]:
    """The ids an agent finishes with: its best programs on matched evidence (``rank_programs``),
    one Submission each, best first, at most ``limit``."""
    ranked = rank_programs(published, maximize, matched=matched, failure_score=failure_score)
    return [r.submission_id for r in handoff(ranked, limit)]

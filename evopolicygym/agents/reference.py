"""The reference agent: an offline agent (no network, no LLM) that evolves a policy program.

It talks to the Host only the way any agent does: it reads ``task.json``, the program and
the feedback files in its workspace, and runs ``evopolicy session submit`` and
``evopolicy session finish``. Its search is a (1+1) evolution strategy over programs:

- every candidate is evaluated on the same *matched* set of pool indices, so scores
  compare like with like; a candidate replaces the parent only when it beats it;
- edits alternate between **synthesis** (a rule template chosen from the spaces, fitted
  to what the current best program does on probe observations) and **parametric**
  (Gaussian perturbation of the best program's float constants, with a step size that
  follows the 1/5th success rule);
- what the matched evaluations leave of the budget re-evaluates the best candidates on
  fresh indices, then it finishes with its top candidates, best first.

Run as ``python -m evopolicygym.agents.reference [--seed N] [--episodes-per-submission N]``
with ``EVOPOLICY_SESSION``, ``EVOPOLICY_WORKSPACE`` and ``EVOPOLICY_CLI`` set by the Host.
Its transcript goes to stdout, one ``Message`` per line; diagnostics go to stderr.
``evolve`` holds the search and takes the evaluation as a function, so it also runs
in-process against the evaluator, without a session.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import msgspec

from evopolicygym.agents import edits
from evopolicygym.protocol import format_selector
from evopolicygym.transcript import Message, ToolCall

__all__ = [
    "BudgetPlan",
    "Candidate",
    "EvaluateFn",
    "Evolution",
    "Outcome",
    "ProbeFn",
    "Rejected",
    "SessionAgent",
    "SessionUnavailable",
    "Task",
    "Transcript",
    "better",
    "default_episodes_per_evaluation",
    "evolve",
    "files_digest",
    "main",
    "plan_budget",
    "run_agent",
    "temp_probe",
]

# Step size of parametric edits, relative to each constant's magnitude.
INITIAL_SIGMA = 0.8
MIN_SIGMA, MAX_SIGMA = 0.02, 2.0
# The 1/5th success rule: the step is steady when one edit in five succeeds.
SIGMA_UP, SIGMA_DOWN = math.exp(1 / 3), math.exp(-1 / 12)
PROBE_SAMPLES = 256
# Exploration noise of a synthesis edit, relative to the parametric step size.
SYNTHESIS_NOISE = 0.5
# After a failed Gaussian step, try the same step with the opposite sign.
MIRRORED = True
# Attempts at a program not evaluated before, before giving up on the current edit.
FRESH_ATTEMPTS = 8
# Stop submitting after this many rejections in a row that spent nothing.
MAX_IDLE_REJECTIONS = 6
STOPPING_CODES = frozenset({"budget_exhausted", "session_closed", "submission_limit"})


# --------------------------------------------------------------------------- the task


@dataclass(frozen=True)
class Task:
    """``task.json``: the public Benchmark spec and the Run's budget rules."""

    benchmark: dict[str, Any]
    episode_budget: int
    episode_pool_size: int
    max_submissions: int | None
    max_episodes_per_submission: int
    finish_budget_policy: str
    max_candidates: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        budget = int(data["episode_budget"])
        pool = int(data.get("episode_pool_size") or budget)
        subs = data.get("max_submissions")
        return cls(
            benchmark=dict(data.get("benchmark") or {}),
            episode_budget=budget,
            episode_pool_size=pool,
            max_submissions=None if subs is None else int(subs),
            max_episodes_per_submission=int(data.get("max_episodes_per_submission") or pool),
            finish_budget_policy=str(data.get("finish_budget_policy", "allow_early")),
            max_candidates=max(1, int(data.get("max_candidates") or 1)),
        )

    @property
    def exhaust(self) -> bool:
        return self.finish_budget_policy == "require_budget_exhaustion"

    @property
    def maximize(self) -> bool:
        return self.benchmark.get("score_direction", "maximize") != "minimize"


# --------------------------------------------------------------------------- budget planning


@dataclass(frozen=True)
class BudgetPlan:
    """``evaluations`` submissions of ``episodes_per_evaluation`` Episodes on the matched
    indices ``0..k-1``, then one submission per entry of ``confirmations`` (its size) that
    re-evaluates top candidates on fresh indices."""

    episodes_per_evaluation: int
    evaluations: int
    confirmations: tuple[int, ...] = ()

    @property
    def episodes(self) -> int:
        return self.episodes_per_evaluation * self.evaluations + sum(self.confirmations)

    @property
    def submissions(self) -> int:
        return self.evaluations + len(self.confirmations)

    @property
    def matched_indices(self) -> list[int]:
        return list(range(self.episodes_per_evaluation))


def default_episodes_per_evaluation(budget: int) -> int:
    """About sqrt(budget)/2 Episodes per evaluation (4 for 64): enough Episodes to rank
    candidates, enough evaluations to search."""
    return max(1, round(math.sqrt(max(budget, 1)) / 2))


def _chunks(total: int, cap: int) -> list[int]:
    """``total`` split into as few parts of at most ``cap`` as possible, sizes within one."""
    if total <= 0:
        return []
    parts = -(-total // cap)
    size, extra = divmod(total, parts)
    return [size + 1] * extra + [size] * (parts - extra)


def plan_budget(
    budget: int,
    pool_size: int,
    max_submissions: int | None,
    max_episodes_per_submission: int,
    exhaust: bool,
    *,
    episodes_per_evaluation: int | None = None,
    fixed: bool = False,
    reserve: int | None = None,
    min_evaluations: int = 1,
) -> BudgetPlan:
    """How to spend ``budget`` Episodes.

    Matched evaluations of ``k`` Episodes (``episodes_per_evaluation``, by default
    ``default_episodes_per_evaluation``; never above the per-submission limit, the pool or
    the budget) come first; ``reserve`` Episodes (default ``k`` when the budget holds four
    evaluations) and any remainder go to confirmations. When ``max_submissions`` is too
    small for that, ``k`` grows (unless ``fixed``) so the evaluations still fit. With
    ``exhaust`` the plan spends the budget exactly whenever the limits allow it; without, it
    spends as much as the limits allow. It never plans beyond the budget or the limits.
    """
    cap = max(1, min(max_episodes_per_submission, pool_size))
    subs = budget if max_submissions is None else max(0, max_submissions)
    wanted = episodes_per_evaluation or default_episodes_per_evaluation(budget)
    k = max(1, min(wanted, cap) if fixed else min(wanted, cap, max(budget, 1)))
    if budget <= 0 or subs <= 0:
        return BudgetPlan(k, 0)
    if reserve is None:
        reserve = k if budget >= 4 * k else 0
    reserve = max(0, min(reserve, budget))
    desired = max(min_evaluations, (budget - reserve) // k)
    sizes = [k] if fixed else _sizes(k, min(cap, budget))

    def exact(kk: int) -> BudgetPlan | None:
        """The most evaluations of ``kk`` (up to ``desired``) that still spend the budget."""

        def fits(n: int) -> bool:
            return n + len(_chunks(budget - n * kk, cap)) <= subs

        low, high = min_evaluations, min(desired, budget // kk)
        if high < low or not fits(low):
            return None
        # More evaluations never take fewer submissions (kk <= cap): bisect the largest fit.
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(middle) else (low, middle - 1)
        return BudgetPlan(kk, low, tuple(_chunks(budget - low * kk, cap)))

    def partial(kk: int) -> BudgetPlan | None:
        n = min(desired, budget // kk, subs)
        if n < min_evaluations:
            return None
        return BudgetPlan(kk, n, tuple(_chunks(budget - n * kk, cap)[: subs - n]))

    best: BudgetPlan | None = None
    if exhaust:
        for kk in sizes:
            plan = exact(kk)
            if plan is not None and (best is None or plan.evaluations > best.evaluations):
                best = plan
            if best is not None and best.evaluations >= min(desired, budget // kk):
                break  # a larger kk cannot give more evaluations
        if best is not None:
            return best
    # Nothing forces spending, but unspent budget is evidence never gathered: among the plans
    # with the most evaluations, take the one that spends the most (then the smallest k).
    for kk in sizes:
        plan = partial(kk)
        if plan is not None and (
            best is None or (plan.evaluations, plan.episodes) > (best.evaluations, best.episodes)
        ):
            best = plan
    return best or BudgetPlan(k, 0)


def _sizes(low: int, high: int) -> list[int]:
    """Candidate evaluation sizes from ``low`` to ``high``: all of them, or a geometric
    sample when there are too many to try one by one."""
    if high - low <= 4096:
        return list(range(low, high + 1))
    out, size = [], low
    while size < high:
        out.append(size)
        size = max(size + 1, int(size * 1.01))
    return [*out, high]


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Outcome:
    """What one evaluation told: ``score`` is ``None`` when the evaluation failed."""

    score: float | None
    failures: int = 0
    submission_id: int | None = None
    budget_left: int | None = None
    returns: tuple[float, ...] = ()


class Rejected(Exception):
    """The Host refused a request; ``code`` is its rejection code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


EvaluateFn = Callable[[Mapping[str, str], Sequence[int]], "float | Outcome"]
ProbeFn = Callable[[Mapping[str, str]], "edits.ProbeResult | None"]
EditLabel = Literal["baseline", "synthesis", "parametric"]


def files_digest(files: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        data = files[path].encode("utf-8")
        h.update(f"{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@dataclass
class Candidate:
    """One program the agent evaluated, and what it learnt about it."""

    number: int
    files: dict[str, str]
    edit: EditLabel
    note: str  # what the edit was, in a few words
    parent: int | None
    outcome: Outcome | None = None
    confirmations: list[tuple[list[int], Outcome]] = field(default_factory=list)

    @property
    def source(self) -> str:
        return self.files.get("policy.py", "")

    @property
    def digest(self) -> str:
        return files_digest(self.files)

    @property
    def label(self) -> str:
        sid = self.outcome.submission_id if self.outcome else None
        return f"candidate {self.number}" + (f" (Submission {sid})" if sid is not None else "")

    @property
    def evaluated(self) -> bool:
        return self.outcome is not None and self.outcome.score is not None


def better(a: Outcome | None, b: Outcome | None, maximize: bool) -> bool:
    """Is ``a`` strictly better than ``b``: a higher (or lower) score, ties broken by fewer
    failures. A failed or missing evaluation is worse than any score."""
    if a is None or a.score is None:
        return False
    if b is None or b.score is None:
        return True
    if a.score != b.score:
        return a.score > b.score if maximize else a.score < b.score
    return a.failures < b.failures


def _rank_key(candidate: Candidate, maximize: bool) -> tuple[float, int, int]:
    assert candidate.outcome is not None and candidate.outcome.score is not None
    score = candidate.outcome.score
    return (-score if maximize else score, candidate.outcome.failures, candidate.number)


@dataclass
class Evolution:
    """The result of ``evolve``: every candidate, the ranking and the final plan's state."""

    task: Task
    plan: BudgetPlan
    candidates: list[Candidate]
    ranking: list[Candidate]  # distinct programs, best first
    budget_left: int
    submissions_used: int
    stopped: str | None = None  # the rejection code that ended the search early, if any

    @property
    def baseline(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def best(self) -> Candidate | None:
        return self.ranking[0] if self.ranking else None


def _fmt(score: float | None) -> str:
    return "failed" if score is None else f"{score:.6g}"


# --------------------------------------------------------------------------- the search


class _Search:
    """The state of one evolution; ``evolve`` drives it."""

    def __init__(
        self,
        task: Task,
        initial_files: Mapping[str, str],
        evaluate_fn: EvaluateFn,
        *,
        seed: int,
        episodes_per_evaluation: int | None,
        probe_fn: ProbeFn | None,
        say: Callable[[str], None],
        budget_left: int | None,
        submissions_used: int,
    ) -> None:
        self.task = task
        self.evaluate_fn = evaluate_fn
        self.probe_fn = probe_fn
        self.say = say
        self.rng = random.Random(seed)
        self.seed = seed
        self.maximize = task.maximize
        self.initial_files = dict(initial_files)
        self.budget_left = task.episode_budget if budget_left is None else budget_left
        self.subs_used = submissions_used
        self.info = edits.space_info(
            task.benchmark.get("observation_space"), task.benchmark.get("action_space")
        )
        self.templates = edits.template_library(self.info)
        self.plan = plan_budget(
            self.budget_left,
            task.episode_pool_size,
            self.subs_left,
            task.max_episodes_per_submission,
            task.exhaust,
            episodes_per_evaluation=episodes_per_evaluation,
        )
        self.k = self.plan.episodes_per_evaluation
        self.reserve = sum(self.plan.confirmations)
        self.matched = self.plan.matched_indices
        self.candidates: list[Candidate] = []
        self.seen: dict[tuple[str, tuple[int, ...]], Candidate] = {}
        self.refused: set[tuple[str, tuple[int, ...]]] = set()
        self.parent: Candidate | None = None
        self.origin: Candidate | None = None
        self.sigma = INITIAL_SIGMA
        self.tried: set[str] = set()
        # A failed Gaussian step (parent digest, step), to try mirrored next.
        self.mirror: tuple[str, dict[int, float]] | None = None
        self.pending_step: tuple[str, dict[int, float]] | None = None
        self.last_edit: EditLabel = "baseline"
        self.probes: dict[str, edits.ProbeResult | None] = {}
        self.stopped: str | None = None
        self.idle_rejections = 0

    @property
    def subs_left(self) -> int | None:
        limit = self.task.max_submissions
        return None if limit is None else max(0, limit - self.subs_used)

    # ----------------------------------------------------------------- evaluation

    def submit(self, files: Mapping[str, str], indices: Sequence[int]) -> Outcome:
        """Evaluate; raises Rejected. Keeps the budget and submission counts in step."""
        result = self.evaluate_fn(dict(files), list(indices))
        outcome = result if isinstance(result, Outcome) else Outcome(score=float(result))
        self.subs_used += 1
        self.idle_rejections = 0
        if outcome.budget_left is not None:
            self.budget_left = outcome.budget_left
        else:
            self.budget_left -= len(indices)
        return outcome

    def remaining_plan(self) -> BudgetPlan:
        return plan_budget(
            self.budget_left,
            self.task.episode_pool_size,
            self.subs_left,
            self.task.max_episodes_per_submission,
            self.task.exhaust,
            episodes_per_evaluation=self.k,
            fixed=True,
            reserve=min(self.reserve, self.budget_left),
            min_evaluations=0,
        )

    def rejected(self, exc: Rejected) -> None:
        self.idle_rejections += 1
        if exc.code in STOPPING_CODES or self.idle_rejections >= MAX_IDLE_REJECTIONS:
            self.stopped = exc.code
        self.say(f"The Host rejected that submission ({exc.code}): {exc.message}")

    # ----------------------------------------------------------------- the loop

    def run(self) -> Evolution:
        task, plan = self.task, self.plan
        matched = format_selector(self.matched)
        self.say(
            f"Budget: {self.budget_left} Episodes, pool of {task.episode_pool_size}, "
            f"{'no submission limit' if task.max_submissions is None else f'{self.subs_left} submissions left'}, "
            f"at most {task.max_episodes_per_submission} Episodes per submission, finish policy "
            f"{task.finish_budget_policy}; the score is to be "
            f"{'maximized' if self.maximize else 'minimized'}. Plan: every candidate runs on the "
            f"same Episodes {matched} ({self.k} each), so scores compare like with like: "
            f"{plan.evaluations} evaluations (the baseline and {max(0, plan.evaluations - 1)} edits), "
            + (
                f"then {sum(plan.confirmations)} Episodes in {len(plan.confirmations)} submission(s) "
                "re-evaluating the best on fresh indices."
                if plan.confirmations
                else "and nothing held back."
            )
            + (
                f" Rule templates for these spaces: {', '.join(self.templates)}."
                if self.templates
                else " No rule template fits these spaces, so edits are parametric only."
            )
        )
        baseline = self.new_candidate(self.initial_files, "baseline", "the initial program", None)
        self.origin = baseline
        if plan.evaluations > 0:
            self.say(f"First the initial program as the baseline, on Episodes {matched}.")
            self.evaluate_matched(baseline)
            if baseline.evaluated:
                self.parent = baseline
        while self.stopped is None:
            if self.remaining_plan().evaluations <= 0:
                break
            candidate = self.next_candidate()
            if candidate is None:
                self.say(
                    "No further edit is possible; the rest of the budget goes to re-evaluation."
                )
                break
            self.evaluate_matched(candidate)
            if candidate.outcome is not None:
                self.judge(candidate)
        if self.stopped is None:
            self.confirm()
        ranking = self.ranking()
        return Evolution(
            task=task,
            plan=plan,
            candidates=self.candidates,
            ranking=ranking,
            budget_left=self.budget_left,
            submissions_used=self.subs_used,
            stopped=self.stopped,
        )

    def new_candidate(
        self, files: Mapping[str, str], edit: EditLabel, note: str, parent: Candidate | None
    ) -> Candidate:
        return Candidate(
            number=len(self.candidates),
            files=dict(files),
            edit=edit,
            note=note,
            parent=None if parent is None else parent.number,
        )

    def evaluate_matched(self, candidate: Candidate) -> None:
        key = (candidate.digest, tuple(self.matched))
        try:
            outcome = self.submit(candidate.files, self.matched)
        except Rejected as exc:
            self.rejected(exc)
            self.refused.add(key)
            if exc.code == "program_invalid":
                # Nothing was evaluated, but the edit failed: it counts against the step size.
                self.sigma = max(MIN_SIGMA, self.sigma * SIGMA_DOWN)
            return
        candidate.outcome = outcome
        self.candidates.append(candidate)
        self.seen[key] = candidate

    def judge(self, candidate: Candidate) -> None:
        outcome, parent = candidate.outcome, self.parent
        assert outcome is not None
        detail = f"{_fmt(outcome.score)} with {outcome.failures} failure(s)"
        if parent is None:
            if candidate.evaluated:
                self.parent = candidate
                self.say(
                    f"{candidate.label} scored {detail}; the first score, so it is the parent."
                )
            else:
                self.say(f"The evaluation of {candidate.label} failed; nothing scored yet.")
            return
        assert parent.outcome is not None
        wins = better(outcome, parent.outcome, self.maximize)
        tunable_parent = bool(self.constants(parent.source))
        # A synthesized rule that only ties a parent with nothing to tune still takes over:
        # it acts as well and, unlike the parent, can be tuned.
        ties_untunable = (
            not wins
            and candidate.edit == "synthesis"
            and not tunable_parent
            and not better(parent.outcome, outcome, self.maximize)
        )
        tried_step, self.pending_step = self.pending_step, None
        if candidate.edit == "parametric":
            if not wins and candidate.note == "perturbed constants":
                self.mirror = tried_step
            self.sigma = (
                min(MAX_SIGMA, self.sigma * SIGMA_UP)
                if wins
                else max(MIN_SIGMA, self.sigma * SIGMA_DOWN)
            )
            step = f" The step size becomes {self.sigma:.3g}."
        else:
            step = ""
        if wins or ties_untunable:
            self.parent = candidate
            why = "beats" if wins else "ties"
            self.say(
                f"{candidate.label} scored {detail} on the matched Episodes: it {why} the best "
                f"({_fmt(parent.outcome.score)}), so it becomes the parent.{step}"
            )
        else:
            self.say(
                f"{candidate.label} scored {detail}: not better than the best "
                f"({_fmt(parent.outcome.score)}), so it is set aside.{step}"
            )

    # ----------------------------------------------------------------- edits

    def constants(self, source: str) -> list[edits.NumericConstant]:
        try:
            return edits.find_constants(source)
        except (SyntaxError, ValueError):
            return []

    def next_candidate(self) -> Candidate | None:
        # Until something scores, edits start from the initial program (whose own evaluation
        # may have been refused, e.g. as a duplicate after a restart of the agent).
        base = self.parent or self.origin
        if base is None:
            return None
        tunable = bool(self.constants(base.source))
        current = edits.detect_template(base.source)
        pending = [t for t in self.templates if t not in self.tried and t != current]
        if self.templates and not tunable:
            template = next((t for t in self.templates if t != current), self.templates[0])
            return self.synthesis(base, template)
        if pending and self.last_edit != "synthesis":
            return self.synthesis(base, pending[0])
        if tunable:
            return self.parametric(base)
        if self.templates:
            return self.synthesis(base, self.templates[0])
        return None

    def fresh(self, files: Mapping[str, str]) -> bool:
        key = (files_digest(files), tuple(self.matched))
        return key not in self.seen and key not in self.refused

    def parametric(self, parent: Candidate) -> Candidate | None:
        self.last_edit = "parametric"
        count = len(self.constants(parent.source))
        mirror, self.mirror = self.mirror, None
        if MIRRORED and mirror is not None and mirror[0] == parent.digest:
            files = {**parent.files, "policy.py": edits.apply_step(parent.source, mirror[1], -1.0)}
            if self.fresh(files):
                self.say(
                    f"Parametric edit of {parent.label}: the mirror image of the step that just "
                    "failed (the same step, opposite sign), since the other direction often helps."
                )
                return self.new_candidate(files, "parametric", "mirrored step", parent)
        for _ in range(FRESH_ATTEMPTS):
            source, step = edits.mutate_constants(parent.source, self.rng, self.sigma)
            files = {**parent.files, "policy.py": source}
            if step and self.fresh(files):
                which = "all" if len(step) == count else f"{len(step)} of the"
                self.say(
                    f"Parametric edit of {parent.label}: a Gaussian step on {which} {count} tunable "
                    f"constant(s), each scaled to its own magnitude, relative step {self.sigma:.3g}."
                )
                self.pending_step = (parent.digest, step)
                return self.new_candidate(files, "parametric", "perturbed constants", parent)
        return None

    def probe(self, parent: Candidate) -> edits.ProbeResult | None:
        if parent.digest not in self.probes:
            result = None
            if self.probe_fn is not None:
                try:
                    result = self.probe_fn(parent.files)
                except Exception as exc:  # a probe is a hint: the edit goes on without it
                    print(f"reference agent: probe failed: {exc!r}", file=sys.stderr)
            self.probes[parent.digest] = result if result is not None and result.ok else None
        return self.probes[parent.digest]

    def synthesis(self, parent: Candidate, template: str) -> Candidate | None:
        self.last_edit = "synthesis"
        self.tried.add(template)
        self.say(
            f"Synthesis edit: replace the rule of {parent.label} with "
            f"{edits.TEMPLATE_DESCRIPTIONS[template]}. To start close to what it does now, "
            + (
                "I fit the template to its actions on the probe observations from before."
                if parent.digest in self.probes
                else f"I probe it on {PROBE_SAMPLES} sampled observations and fit the template "
                "to its actions."
            )
        )
        probe = self.probe(parent)
        fit = (
            edits.fit_template(template, self.info, probe.observations, probe.actions)
            if probe is not None
            else edits.fit_template(template, self.info)
        )
        if probe is None:
            self.say(
                "The probe gave nothing usable, so the template starts from neutral parameters."
            )
        elif fit.agreement is not None:
            self.say(
                f"The fitted {template} rule takes the same action as {parent.label} on "
                f"{fit.agreement:.1%} of the probe observations."
            )
        # Noise on every parameter: repeated syntheses then sample around the fitted rule
        # widely, which finds a better start than small moves from a copy of the parent.
        noise = SYNTHESIS_NOISE * self.sigma
        for _ in range(FRESH_ATTEMPTS):
            trial = fit.copy()
            trial.perturb(self.rng, noise)
            files = {"policy.py": edits.render_template(self.info, trial)}
            if self.fresh(files):
                self.say(
                    f"I add exploration noise (relative step {noise:.3g}) to all its parameters so "
                    "it is a real variant rather than a copy, and evaluate it."
                )
                return self.new_candidate(files, "synthesis", template, parent)
        return None

    # ----------------------------------------------------------------- confirmation

    def ranking(self) -> list[Candidate]:
        scored = [c for c in self.candidates if c.evaluated]
        scored.sort(key=lambda c: _rank_key(c, self.maximize))
        distinct: list[Candidate] = []
        digests: set[str] = set()
        for candidate in scored:
            if candidate.digest not in digests:
                digests.add(candidate.digest)
                distinct.append(candidate)
        confirmed = [c for c in distinct[: self.task.max_candidates] if c.confirmations]
        if len(confirmed) > 1 and len({tuple(c.confirmations[0][0]) for c in confirmed}) == 1:
            # The re-evaluated leaders share fresh Episodes too: order them on all their Episodes.
            head = sorted(confirmed, key=lambda c: self.pooled_key(c))
            rest = [c for c in distinct if c not in confirmed]
            distinct = head + rest
        return distinct

    def pooled_key(self, candidate: Candidate) -> tuple[float, int]:
        assert candidate.outcome is not None and candidate.outcome.score is not None
        total = candidate.outcome.score * self.k
        count = self.k
        failures = candidate.outcome.failures
        for indices, outcome in candidate.confirmations:
            if outcome.score is not None:
                total += outcome.score * len(indices)
                count += len(indices)
                failures += outcome.failures
        mean = total / count
        return (-mean if self.maximize else mean, failures)

    def confirm(self) -> None:
        """Spend what is left re-evaluating the leaders on Episodes outside the matched set."""
        chunks = list(self.remaining_plan().confirmations)
        leaders = self.ranking()[: self.task.max_candidates]
        if not leaders or not chunks:
            return
        self.say(
            f"{self.budget_left} Episodes left: re-evaluating the best candidate(s) on fresh "
            "Episodes, outside the matched set, to check the scores hold beyond it."
        )
        used: dict[int, int] = {}  # candidate number -> fresh Episodes it already ran
        turn = attempts = 0
        while chunks and self.stopped is None and attempts < len(chunks) + MAX_IDLE_REJECTIONS:
            attempts += 1
            size = min(chunks[0], self.budget_left)
            if size <= 0:
                break
            leader = leaders[turn % len(leaders)]
            indices = self.fresh_indices(used.get(leader.number, 0), size)
            try:
                outcome = self.submit(leader.files, indices)
            except Rejected as exc:
                self.rejected(exc)
                if exc.code == "duplicate_submission":
                    used[leader.number] = used.get(leader.number, 0) + size
                elif exc.code == "budget_allocation" and size > 1:
                    chunks[0:1] = [size // 2, size - size // 2]
                else:
                    turn += 1
                continue
            chunks.pop(0)
            turn += 1
            used[leader.number] = used.get(leader.number, 0) + size
            leader.confirmations.append((indices, outcome))
            matched = leader.outcome.score if leader.outcome else None
            self.say(
                f"{leader.label} scored {_fmt(outcome.score)} with {outcome.failures} failure(s) "
                f"on fresh Episodes {format_selector(indices)} (it scored {_fmt(matched)} on the "
                "matched set)."
            )

    def fresh_indices(self, offset: int, size: int) -> list[int]:
        """``size`` indices just past the matched set (after ``offset`` already used),
        wrapping around when the pool runs out."""
        pool = self.task.episode_pool_size
        size = min(size, pool)
        start = self.k + offset
        if start + size > pool:
            start = offset % max(1, pool - size + 1)
        return list(range(start, start + size))


def evolve(
    task: Task,
    initial_files: Mapping[str, str],
    evaluate_fn: EvaluateFn,
    *,
    seed: int = 0,
    episodes_per_evaluation: int | None = None,
    probe_fn: ProbeFn | None = None,
    say: Callable[[str], None] | None = None,
    budget_left: int | None = None,
    submissions_used: int = 0,
) -> Evolution:
    """Evolve ``initial_files`` (path -> text; ``policy.py`` at least) within the task's budget.

    ``evaluate_fn(files, indices)`` evaluates a program on pool indices and returns its score
    or an ``Outcome``; it raises ``Rejected`` when the Host refuses. ``probe_fn(files)`` runs
    a program on probe observations (see ``edits.run_probe``) to seed synthesis edits.
    ``say`` receives the reasoning as text. Deterministic for a fixed ``seed`` and the same
    evaluation results.
    """
    search = _Search(
        task,
        initial_files,
        evaluate_fn,
        seed=seed,
        episodes_per_evaluation=episodes_per_evaluation,
        probe_fn=probe_fn,
        say=say or (lambda _text: None),
        budget_left=budget_left,
        submissions_used=submissions_used,
    )
    return search.run()


def temp_probe(task: Task, *, seed: int = 0) -> ProbeFn:
    """A ``probe_fn`` that writes each program to a temporary directory and probes it there."""

    def probe(files: Mapping[str, str]) -> edits.ProbeResult | None:
        with tempfile.TemporaryDirectory(prefix="reference-probe-") as scratch:
            root = Path(scratch)
            _write_files(root / "program", files)
            (root / "task.json").write_text(json.dumps({"benchmark": task.benchmark}))
            return edits.run_probe(
                root / "program", root / "task.json", samples=PROBE_SAMPLES, seed=seed
            )

    return probe


def _write_files(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# --------------------------------------------------------------------------- the transcript


class Transcript:
    """The normalized transcript on a stream: one ``Message`` per line, flushed per line.

    Reasoning said with ``say`` becomes the text of the next assistant message; each tool
    call is an assistant message with one call followed by the tool's result.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.pending: list[str] = []
        self.calls = 0

    def emit(self, message: Message) -> None:
        self.stream.write(msgspec.json.encode(message) + b"\n")
        self.stream.flush()

    def say(self, text: str) -> None:
        self.pending.append(text)

    def flush(self) -> None:
        if self.pending:
            self.emit(
                Message(role="assistant", content="\n\n".join(self.pending), at=time.time_ns())
            )
            self.pending = []

    def tool(self, name: str, arguments: dict[str, Any], run: Callable[[], str]) -> str:
        self.calls += 1
        call_id = f"call_{self.calls:04d}"
        self.emit(
            Message(
                role="assistant",
                content="\n\n".join(self.pending),
                tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)],
                at=time.time_ns(),
            )
        )
        self.pending = []
        result = run()
        self.emit(
            Message(role="tool", content=result, tool_call_id=call_id, name=name, at=time.time_ns())
        )
        return result


# --------------------------------------------------------------------------- the session


class SessionUnavailable(Exception):
    """The session command could not run or answered with a client error (exit 2)."""


@dataclass
class Published:
    submission_id: int
    score: float | None
    failures: int
    digest: str | None


class SessionAgent:
    """Workspace files and session commands, every use recorded in the transcript."""

    def __init__(
        self, workspace: Path, cli: Sequence[str], transcript: Transcript, seed: int
    ) -> None:
        self.workspace = workspace
        self.cli = list(cli)
        self.transcript = transcript
        self.seed = seed
        self.dirs: dict[str, str] = {}  # program digest -> its directory, relative
        self.published: list[Published] = []
        self.maximize = True
        self.names = 0
        self.probe_written = False
        self.initial_files: dict[str, str] = {}

    # ----------------------------------------------------------------- tools

    def read_file(self, rel: str) -> str | None:
        path = self.workspace / rel
        box: list[str | None] = [None]

        def run() -> str:
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                return (
                    f"error: cannot read {rel}: {exc.strerror if isinstance(exc, OSError) else exc}"
                )
            box[0] = text
            return text

        self.transcript.tool("read_file", {"path": rel}, run)
        return box[0]

    def write_file(self, rel: str, content: str) -> None:
        def run() -> str:
            path = self.workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            return f"wrote {len(content.encode('utf-8'))} bytes to {rel}"

        self.transcript.tool("write_file", {"path": rel, "content": content}, run)

    def bash(
        self, shown: list[str], argv: list[str], timeout: float | None = None
    ) -> tuple[int, str, str]:
        """Run ``argv`` in the workspace; the transcript shows ``shown`` as the command."""
        box: list[tuple[int, str, str]] = [(127, "", "")]

        def run() -> str:
            try:
                done = subprocess.run(
                    argv,
                    cwd=self.workspace,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    stdin=subprocess.DEVNULL,
                )
                box[0] = (done.returncode, done.stdout, done.stderr)
            except (OSError, subprocess.TimeoutExpired) as exc:
                box[0] = (127, "", f"error: {exc}\n")
            code, out, err = box[0]
            parts = [text.rstrip("\n") for text in (out, err) if text.strip()]
            parts.append(f"[exit code {code}]")
            return "\n".join(parts)

        self.transcript.tool("bash", {"command": shlex.join(shown)}, run)
        return box[0]

    # ----------------------------------------------------------------- reading

    def read_task(self) -> Task:
        text = self.read_file("task.json")
        if text is None:
            raise RuntimeError("task.json is missing")
        task = Task.from_dict(json.loads(text))
        self.maximize = task.maximize
        return task

    def read_program(self) -> dict[str, str]:
        root = self.workspace / "program"
        rels = sorted(
            str(p.relative_to(root).as_posix())
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
        if "policy.py" in rels:  # read the policy first: it is what matters
            rels.remove("policy.py")
            rels.insert(0, "policy.py")
        files: dict[str, str] = {}
        for rel in rels:
            text = self.read_file(f"program/{rel}")
            if text is not None:
                files[rel] = text
        self.initial_files = dict(files)
        self.dirs[files_digest(files)] = "program"
        return files

    def read_history(self) -> tuple[int | None, int]:
        """What an earlier start of this agent already spent: (budget left, submissions)."""
        feedback = self.workspace / "feedback"
        entries = (
            sorted(p.name for p in feedback.glob("submission-*") if p.is_dir())
            if feedback.is_dir()
            else []
        )
        if not entries:
            return None, 0
        self.transcript.say(
            f"feedback/ already holds {len(entries)} submission(s) from an earlier start: "
            "I read the latest to know the budget left."
        )
        for name in entries:
            data = self._json(self.read_file(f"feedback/{name}/feedback.json"))
            if (
                data
                and data.get("status") == "published"
                and isinstance(data.get("submission_id"), int)
            ):
                digest = data.get("program_digest")
                self.published.append(
                    Published(
                        data["submission_id"],
                        data.get("score"),
                        int(data.get("failures") or 0),
                        digest if isinstance(digest, str) else None,
                    )
                )
        latest = self._json(self.read_file("feedback/latest.json")) or {}
        left = latest.get("budget_left")
        return (int(left) if isinstance(left, int) else None), len(entries)

    @staticmethod
    def _json(text: str | None) -> dict[str, Any] | None:
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    # ----------------------------------------------------------------- probing

    def probe(self, files: Mapping[str, str]) -> edits.ProbeResult | None:
        rel = self.dirs.get(files_digest(files)) or self.write_candidate(files)
        if not self.probe_written:
            self.transcript.say(
                "A small script to see what a program does on sampled observations:"
            )
            self.write_file("analysis/probe.py", edits.PROBE_SCRIPT)
            self.probe_written = True
        args = [rel, "task.json", "--samples", str(PROBE_SAMPLES), "--seed", str(self.seed)]
        code, out, _err = self.bash(
            ["python", "analysis/probe.py", *args],
            [sys.executable, "analysis/probe.py", *args],
            timeout=120,
        )
        if code != 0:
            return None
        try:
            data = json.loads(out)
            return edits.ProbeResult(
                data["observations"], data["actions"], int(data["errors"]), out, True
            )
        except (ValueError, KeyError, TypeError):
            return None

    # ----------------------------------------------------------------- submitting

    def write_candidate(self, files: Mapping[str, str]) -> str:
        digest = files_digest(files)
        if digest in self.dirs:
            return self.dirs[digest]
        self.names += 1
        rel = f"analysis/candidates/c{self.names:03d}"
        while (self.workspace / rel).exists():  # an earlier start of the agent used it
            self.names += 1
            rel = f"analysis/candidates/c{self.names:03d}"
        for path, text in files.items():
            self.write_file(f"{rel}/{path}", text)
        self.dirs[digest] = rel
        return rel

    def evaluate(self, files: Mapping[str, str], indices: Sequence[int]) -> Outcome:
        rel = self.write_candidate(files)
        selector = format_selector(indices)
        args = ["session", "submit", rel, "--episodes", selector]
        code, out, err = self.bash(["evopolicy", *args], [*self.cli, *args])
        if code == 1:
            error = (self._json(err) or {}).get("error") or {}
            raise Rejected(
                str(error.get("code", "unknown")), str(error.get("message", err.strip()))
            )
        if code != 0:
            raise SessionUnavailable(err.strip() or f"exit code {code}")
        reply = self._json(out) or {}
        sid = reply.get("submission_id")
        data = None
        if isinstance(sid, int):
            data = self._json(self.read_file(f"feedback/submission-{sid:04d}/feedback.json"))
        if data is None or data.get("submission_id") != sid:
            data = self._json(self.read_file("feedback/latest.json"))
        if data is None or data.get("submission_id") != sid:
            print(
                "reference agent: feedback files unreadable, using the command's reply",
                file=sys.stderr,
            )
            data = reply
        score = data.get("score")
        outcome = Outcome(
            score=float(score)
            if isinstance(score, int | float) and data.get("status") != "failed"
            else None,
            failures=int(data.get("failures") or 0),
            submission_id=sid if isinstance(sid, int) else None,
            budget_left=data.get("budget_left")
            if isinstance(data.get("budget_left"), int)
            else None,
            returns=tuple(float(e.get("total_reward", 0.0)) for e in data.get("episodes") or []),
        )
        if outcome.submission_id is not None and data.get("status", "published") == "published":
            digest = data.get("program_digest")
            self.published.append(
                Published(
                    outcome.submission_id,
                    outcome.score,
                    outcome.failures,
                    digest if isinstance(digest, str) else None,
                )
            )
        return outcome

    def finish(self, ids: Sequence[int]) -> tuple[int, str]:
        args = ["session", "finish", *(str(i) for i in ids)]
        code, _out, err = self.bash(["evopolicy", *args], [*self.cli, *args])
        if code == 1:
            error = (self._json(err) or {}).get("error") or {}
            return code, str(error.get("code", "unknown"))
        return code, ""

    def fallback_ids(self, limit: int) -> list[int]:
        """The best published submissions, distinct programs, for finishing without a result."""
        scored = [p for p in self.published if p.score is not None]
        sign = -1.0 if self.maximize else 1.0
        scored.sort(key=lambda p: (sign * (p.score or 0.0), p.failures, p.submission_id))
        ids: list[int] = []
        digests: set[str] = set()
        for p in scored:
            if p.digest is not None and p.digest in digests:
                continue
            if p.digest is not None:
                digests.add(p.digest)
            ids.append(p.submission_id)
        return ids[:limit]


def _finish_ids(evolution: Evolution) -> list[int]:
    ids: list[int] = []
    for candidate in evolution.ranking:
        sid = candidate.outcome.submission_id if candidate.outcome else None
        if sid is not None and sid not in ids:
            ids.append(sid)
    return ids[: evolution.task.max_candidates]


def _spend_remainder(
    agent: SessionAgent, task: Task, files: Mapping[str, str], left: int, k: int
) -> int:
    """Under require_budget_exhaustion: spend ``left`` Episodes on the best program."""
    cap = max(1, min(task.max_episodes_per_submission, task.episode_pool_size))
    start = k
    for _ in range(MAX_IDLE_REJECTIONS):
        if left <= 0:
            break
        size = min(cap, left)
        if start + size > task.episode_pool_size:
            start = 0
        indices = list(range(start, start + size))
        try:
            outcome = agent.evaluate(files, indices)
        except Rejected as exc:
            agent.transcript.say(f"That was rejected too ({exc.code}).")
            if exc.code in STOPPING_CODES:
                break
            start = (start + 1) % max(1, task.episode_pool_size - size + 1)
            continue
        left = outcome.budget_left if outcome.budget_left is not None else left - size
        start = (start + size) % task.episode_pool_size
    return left


def run_agent(
    workspace: Path, cli: Sequence[str], seed: int, episodes: int | None, out: IO[bytes]
) -> int:
    """The agent's whole life in ``workspace``: read, evolve, finish. Always returns 0: an
    unexpected problem ends the search, and the agent finishes with what it has."""
    transcript = Transcript(out)
    agent = SessionAgent(workspace, cli, transcript, seed)
    evolution: Evolution | None = None
    task: Task | None = None
    transcript.say(
        "Plan: read task.json and the current program; evaluate the program as a baseline on a "
        "fixed, matched set of Episodes; then alternate synthesis edits (replace the rule with a "
        "template fitted to the current best's behaviour) and parametric edits (Gaussian steps on "
        "its numeric constants, with an adaptive step size), keeping a candidate only when it beats "
        "the best on the matched Episodes; spend what is left re-checking the best on fresh "
        "Episodes; finish with the top candidates, best first."
    )
    try:
        task = agent.read_task()
        budget_left, used = agent.read_history()
        files = agent.read_program()
        if "policy.py" not in files:
            transcript.say("program/ has no readable policy.py; candidates start from templates.")
        evolution = evolve(
            task,
            files,
            agent.evaluate,
            seed=seed,
            episodes_per_evaluation=episodes,
            probe_fn=agent.probe,
            say=transcript.say,
            budget_left=budget_left,
            submissions_used=used,
        )
    except SessionUnavailable as exc:
        print(f"reference agent: session unavailable: {exc}", file=sys.stderr)
        transcript.say(f"The session command failed ({exc}); I finish with what I have.")
    except Exception:
        traceback.print_exc(file=sys.stderr)
        transcript.say("Something unexpected went wrong; I finish with what I have.")
    try:
        _finish(agent, task, evolution)
    except Exception:
        traceback.print_exc(file=sys.stderr)
    transcript.flush()
    return 0


def _finish(agent: SessionAgent, task: Task | None, evolution: Evolution | None) -> None:
    transcript = agent.transcript
    if evolution is not None and evolution.stopped == "session_closed":
        transcript.say("The session is closed: there is nothing left to do.")
        return
    limit = task.max_candidates if task else 1
    ids = (_finish_ids(evolution) if evolution else []) or agent.fallback_ids(limit)
    if not ids:
        transcript.say("No submission was published, so there is nothing to finish with.")
        return
    if evolution is not None and evolution.ranking:
        lines = []
        for candidate in evolution.ranking[: len(ids)]:
            assert candidate.outcome is not None
            extra = "".join(
                f"; {_fmt(o.score)} on fresh Episodes {format_selector(i)}"
                for i, o in candidate.confirmations
            )
            lines.append(
                f"- {candidate.label}: {_fmt(candidate.outcome.score)} on the matched set ({candidate.edit}: {candidate.note}){extra}"
            )
        baseline = evolution.baseline
        base = _fmt(baseline.outcome.score) if baseline and baseline.outcome else "none"
        transcript.say(
            f"Finishing with Submission(s) {', '.join(map(str, ids))}, best first (the baseline scored {base}):\n"
            + "\n".join(lines)
        )
    for _ in range(4):
        code, reason = agent.finish(ids)
        if code != 1:
            return
        if reason == "candidate_limit" and len(ids) > 1:
            ids = ids[: len(ids) - 1]
        elif reason in ("unknown_submission", "invalid_request") and len(ids) > 1:
            ids = ids[:1]
        elif reason == "budget_remaining" and task is not None:
            latest = agent._json(agent.read_file("feedback/latest.json")) or {}
            left = latest.get("budget_left")
            if not isinstance(left, int) or left <= 0:
                break
            best = evolution.best if evolution else None
            files = best.files if best is not None else agent.initial_files
            k = evolution.plan.episodes_per_evaluation if evolution else 0
            transcript.say(
                f"The Run wants the whole budget spent before finishing: {left} Episodes go to "
                "re-evaluating the best program on more Episodes."
            )
            _spend_remainder(agent, task, files, left, k)
        else:
            break
        transcript.say(f"The finish was rejected ({reason}); trying again.")
    transcript.say("The Run did not accept a finish; I stop here.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evopolicygym.agents.reference", description=__doc__
    )
    parser.add_argument("--seed", type=int, default=0, help="the agent's own random seed")
    parser.add_argument(
        "--episodes-per-submission", type=int, default=None, help="Episodes per matched evaluation"
    )
    args = parser.parse_args(argv)
    workspace = Path(os.environ.get("EVOPOLICY_WORKSPACE") or os.getcwd())
    try:
        cli = json.loads(os.environ.get("EVOPOLICY_CLI") or '["evopolicy"]')
        if not isinstance(cli, list) or not cli or not all(isinstance(a, str) for a in cli):
            raise ValueError("not a non-empty list of strings")
    except ValueError as exc:
        print(
            f"reference agent: EVOPOLICY_CLI is unusable ({exc}); using evopolicy", file=sys.stderr
        )
        cli = ["evopolicy"]
    episodes = args.episodes_per_submission if (args.episodes_per_submission or 0) > 0 else None
    return run_agent(workspace, cli, args.seed, episodes, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())

"""The reference agent's search: a (1+1) evolution strategy over policy programs.

- every candidate is evaluated on the same *matched* set of pool indices, so scores
  compare like with like; a candidate replaces the parent only when it beats it;
- edits alternate between **synthesis** (a rule template chosen from the spaces, fitted
  to what the current best program does on probe observations) and **parametric**
  (Gaussian perturbation of the best program's float constants, with a step size that
  follows the 1/5th success rule);
- what the matched evaluations leave of the budget re-evaluates the best candidates on
  fresh indices;
- the handoff is the best candidates on matched evidence (``session_client.rank_programs``):
  by their score on the matched set, none no better than a failure while a better one exists.

``evolve`` holds the search and takes the evaluation as a function (which raises
``Rejected`` when the Host refuses), so it runs against the session (``reference``) or
in-process against the evaluator alike. The edits themselves are in ``edits``; the
budget plan in ``reference_budget``.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import random
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from evopolicygym.agents import edits
from evopolicygym.agents.reference_budget import BudgetPlan, Task, plan_budget
from evopolicygym.agents.session_client import (
    Published,
    RankedProgram,
    Rejected,
    handoff,
    rank_programs,
)
from evopolicygym.program import program_digest
from evopolicygym.protocol import format_selector

__all__ = [
    "MAX_IDLE_REJECTIONS",
    "PROBE_SAMPLES",
    "STOPPING_CODES",
    "Candidate",
    "EvaluateFn",
    "Evolution",
    "Outcome",
    "ProbeFn",
    "evolve",
    "files_digest",
    "format_score",
    "outranks",
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


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Outcome:
    """What one evaluation told: ``score`` is ``None`` when the evaluation failed.
    ``charged``: it took a Submission now (not one already published before a restart)."""

    score: float | None
    failures: int = 0
    submission_id: int | None = None
    budget_left: int | None = None
    returns: tuple[float, ...] = ()
    charged: bool = True


# (files, indices) -> score or Outcome; it may also take ``parent=`` (see _Search.submit).
EvaluateFn = Callable[..., "float | Outcome"]
ProbeFn = Callable[[Mapping[str, str]], "edits.ProbeResult | None"]
EditLabel = Literal["baseline", "synthesis", "parametric"]


def files_digest(files: Mapping[str, str]) -> str:
    """The program's digest as the Host computes it (``program_digest``), so a candidate and
    the Submissions of its files are known to be the same program."""
    return program_digest((path, text.encode("utf-8")) for path, text in files.items())


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


def outranks(a: Outcome | None, b: Outcome | None, maximize: bool) -> bool:
    """Is ``a`` strictly better than ``b``: a higher (or lower) score, ties broken by fewer
    failures. A failed or missing evaluation is worse than any score."""
    if a is None or a.score is None:
        return False
    if b is None or b.score is None:
        return True
    if a.score != b.score:
        return a.score > b.score if maximize else a.score < b.score
    return a.failures < b.failures


@dataclass
class Evolution:
    """The result of ``evolve``: every candidate, the ranking and the final plan's state."""

    task: Task
    plan: BudgetPlan
    candidates: list[Candidate]
    ranking: list[Candidate]  # distinct scored programs, best first on matched evidence
    handoff: list[Candidate]  # what to finish with: the best, at most max_candidates
    budget_left: int
    submissions_used: int
    stopped: str | None = None  # the rejection code that ended the search early, if any

    @property
    def baseline(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def best(self) -> Candidate | None:
        return self.handoff[0] if self.handoff else None


def format_score(score: float | None) -> str:
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
        # Whether the evaluation takes the edit's parent (the session does; an in-process one
        # need not).
        self._states_parents = "parent" in inspect.signature(evaluate_fn).parameters
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

    def submit(
        self, files: Mapping[str, str], indices: Sequence[int], parent: int | None = None
    ) -> Outcome:
        """Evaluate; raises Rejected. Keeps the budget and submission counts in step.
        ``parent``: the Submission the program was edited from (0: the initial program), told
        to an evaluation that takes it (the session records it as the edit's parent)."""
        if parent is not None and self._states_parents:
            result = self.evaluate_fn(dict(files), list(indices), parent=parent)
        else:
            result = self.evaluate_fn(dict(files), list(indices))
        outcome = result if isinstance(result, Outcome) else Outcome(score=float(result))
        self.subs_used += outcome.charged
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
        submissions = (
            "no submission limit"
            if task.max_submissions is None
            else f"{self.subs_left} submissions left"
        )
        edits = max(0, plan.evaluations - 1)
        confirmations = len(plan.confirmations)
        self.say(
            f"Budget: {self.budget_left} Episodes, pool of {task.episode_pool_size}, "
            f"{submissions}, "
            f"at most {task.max_episodes_per_submission} Episodes per submission, finish policy "
            f"{task.finish_budget_policy}; the score is to be "
            f"{'maximized' if self.maximize else 'minimized'}. Plan: every candidate runs on the "
            f"same Episodes {matched} ({self.k} each), so scores compare like with like: "
            f"{plan.evaluations} evaluations (the baseline and {edits} edits), "
            + (
                f"then {sum(plan.confirmations)} Episodes in {confirmations} submission(s) "
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
                self.reserve = self.budget_left
                break
            self.evaluate_matched(candidate)
            if candidate.outcome is not None:
                self.judge(candidate)
        if self.stopped is None:
            self.confirm()
        return Evolution(
            task=task,
            plan=plan,
            candidates=self.candidates,
            ranking=self.candidates_of(self.ranked()),
            handoff=self.handoff(),
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

    def parent_submission(self, candidate: Candidate) -> int | None:
        """The Submission ``candidate`` was edited from: its parent candidate's (0, the
        initial program, for the baseline itself); None where that one was never submitted."""
        if candidate.parent is None:
            return 0
        parent = self.candidates[candidate.parent]
        return parent.outcome.submission_id if parent.outcome is not None else None

    def evaluate_matched(self, candidate: Candidate) -> None:
        key = (candidate.digest, tuple(self.matched))
        try:
            outcome = self.submit(candidate.files, self.matched, self.parent_submission(candidate))
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
        detail = f"{format_score(outcome.score)} with {outcome.failures} failure(s)"
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
        wins = outranks(outcome, parent.outcome, self.maximize)
        tunable_parent = bool(self.constants(parent.source))
        # A synthesized rule that only ties a parent with nothing to tune still takes over:
        # it acts as well and, unlike the parent, can be tuned.
        ties_untunable = (
            not wins
            and candidate.edit == "synthesis"
            and not tunable_parent
            and not outranks(parent.outcome, outcome, self.maximize)
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
                f"({format_score(parent.outcome.score)}), so it becomes the parent.{step}"
            )
        else:
            self.say(
                f"{candidate.label} scored {detail}: not better than the best "
                f"({format_score(parent.outcome.score)}), so it is set aside.{step}"
            )

    # ----------------------------------------------------------------- edits

    def constants(self, source: str) -> list[edits.NumericConstant]:
        try:
            return edits.find_constants(source)
        except (SyntaxError, ValueError):
            return []

    def next_candidate(self) -> Candidate | None:
        # Until something scores, edits start from the initial program (whose own evaluation
        # may have been refused).
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
                    f"Parametric edit of {parent.label}: a Gaussian step on {which} {count} "
                    "tunable constant(s), each scaled to its own magnitude, relative step "
                    f"{self.sigma:.3g}."
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

    def ranked(self) -> list[RankedProgram]:
        """The scored programs, best first on matched evidence (``rank_programs``); each is
        named by its candidate's number."""
        evidence: list[Published] = []
        for c in self.candidates:
            if c.outcome is not None:
                evidence.append(
                    Published(
                        c.number, c.outcome.score, c.outcome.failures, c.digest, tuple(self.matched)
                    )
                )
                evidence.extend(
                    Published(c.number, o.score, o.failures, c.digest, tuple(i))
                    for i, o in c.confirmations
                )
        return rank_programs(
            evidence, self.maximize, matched=self.matched, failure_score=self.task.failure_score
        )

    def candidates_of(self, ranked: Sequence[RankedProgram]) -> list[Candidate]:
        by_number = {c.number: c for c in self.candidates}
        return [by_number[r.submission_id] for r in ranked]

    def handoff(self) -> list[Candidate]:
        return self.candidates_of(handoff(self.ranked(), self.task.max_candidates))

    def confirm(self) -> None:
        """Spend what is left re-evaluating the leaders on Episodes outside the matched set."""
        chunks = list(self.remaining_plan().confirmations)
        leaders = self.handoff()
        if not leaders or not chunks:
            return
        self.say(
            f"{self.budget_left} Episodes left: re-evaluating the best candidate(s) on fresh "
            "Episodes, outside the matched set, to check the scores hold beyond it."
        )
        turn = attempts = 0
        while chunks and self.stopped is None and attempts < len(chunks) + MAX_IDLE_REJECTIONS:
            attempts += 1
            size = min(chunks[0], self.budget_left)
            if size <= 0:
                break
            leader = leaders[turn % len(leaders)]
            indices = self.fresh_indices(leader, size)
            if not indices:  # it has run every Episode of the pool
                leaders.remove(leader)
                if not leaders:
                    break
                continue
            try:
                # A re-evaluation edits nothing: the program is its own parent.
                sid = leader.outcome.submission_id if leader.outcome is not None else None
                outcome = self.submit(leader.files, indices, sid)
            except Rejected as exc:
                self.rejected(exc)
                if exc.code == "budget_allocation" and size > 1:
                    chunks[0:1] = [size // 2, size - size // 2]
                else:
                    turn += 1
                continue
            chunks.pop(0)
            turn += 1
            leader.confirmations.append((indices, outcome))
            matched = leader.outcome.score if leader.outcome else None
            self.say(
                f"{leader.label} scored {format_score(outcome.score)} with {outcome.failures} "
                f"failure(s) on fresh Episodes {format_selector(indices)} (it scored "
                f"{format_score(matched)} on the matched set)."
            )

    def fresh_indices(self, candidate: Candidate, size: int) -> list[int]:
        """Up to ``size`` pool indices ``candidate`` has not run, the lowest first, so leaders
        re-evaluated in turn share them. Under the exhaustion rule, indices it already ran
        make up the number when the pool runs out (a normal, charged Submission)."""
        ran = set(self.matched).union(*(indices for indices, _ in candidate.confirmations))
        pool = range(self.task.episode_pool_size)
        fresh = list(itertools.islice((i for i in pool if i not in ran), size))
        if self.task.exhaust and len(fresh) < size:
            again = itertools.islice((i for i in pool if i in ran), size - len(fresh))
            fresh = sorted([*fresh, *again])
        return fresh


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

"""What the decider's tests share: a tiny driver of the Run (``Run``), the states and
commands they start from, and ``Model``, an independent model of the Run's rules that the
stateful test (tests/test_decider_machine.py) checks ``decide`` and ``evolve`` against.

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishRejected,
    PoolEntry,
    ReferenceValidated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationFailed,
    ValidationStarted,
)
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider import (
    HOST_INTERRUPTED,
    REJECTION_CODES,
    AgentExit,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Conclude,
    Create,
    FailAssessment,
    FailEvaluation,
    FailValidation,
    Finish,
    Interrupt,
    RecordCandidate,
    RecordMessages,
    RecordReference,
    Rejection,
    Resume,
    RunState,
    Select,
    StartAgent,
    StartAssessment,
    StartValidation,
    Submit,
    decide,
    evolve,
    fold,
)
from evopolicygym.transcript import AgentIdentity

__all__ = [
    "AGENT",
    "DA",
    "DB",
    "DC",
    "DIRECTIONS",
    "P0",
    "SEEDS",
    "Model",
    "ModelSubmission",
    "Run",
    "episodes_for",
    "evaluation_started",
    "finished_state",
    "make_config",
    "make_create",
    "make_pool",
    "render",
    "reopened",
    "validated_run",
]

SEEDS = {"pool": 1, "validation": 2, "assessment": 3}
AGENT = AgentIdentity(name="t", provider="command")
P0 = "sha256:p0"  # the initial program
DA, DB, DC = "sha256:aa", "sha256:bb", "sha256:cc"
DIRECTIONS = ("maximize", "minimize")


def make_config(**kwargs: Any) -> RunConfig:
    """A resolved config; rules 1 unless asked otherwise: this file pins the rules every Run
    recorded before rules 2 is replayed with (tests/test_decider_rules2.py has rules 2)."""
    kwargs.setdefault("rules", 1)
    return RunConfig(**kwargs).resolved()


def make_pool(size: int) -> list[PoolEntry]:
    return [
        PoolEntry(index=i, split="train", seed=100 + i, policy_seed=200 + i, scenario={"i": i})
        for i in range(size)
    ]


def make_create(config: RunConfig, direction: str = "maximize") -> Create:
    return Create(
        run_id="run-1",
        config=config,
        benchmark_id="toy",
        benchmark_spec={"score_direction": direction},
        environment_digest="sha256:env",
        initial_program_digest=P0,
        agent=AGENT,
        pool=make_pool(config.pool_size),
        seeds=dict(SEEDS),
    )


def episodes_for(
    indices: tuple[int, ...] | list[int], reward: float = 1.0
) -> list[EpisodeCompleted]:
    return [
        EpisodeCompleted(submission_id=0, index=i, status="ok", total_reward=reward, steps=3)
        for i in indices
    ]


class Run:
    """A tiny driver: decides commands, keeps every event (a rejection's too) and folds them."""

    def __init__(
        self, config: RunConfig | None = None, direction: str = "maximize", **kwargs: Any
    ) -> None:
        self.state = RunState()
        self.events: list[Event] = []
        self.requests = itertools.count(1)
        self.accept(make_create(config or make_config(**kwargs), direction))

    def _fold(self, events: list[Event]) -> None:
        for event in events:
            self.state = evolve(self.state, event)
        self.events.extend(events)

    def decide(self, command: Command) -> list[Event] | Rejection:
        decision = decide(self.state, command)
        if isinstance(decision, Rejection):
            if decision.event is not None:
                self._fold([decision.event])
        else:
            self._fold(decision)
        return decision

    def accept(self, command: Command) -> list[Event]:
        decision = self.decide(command)
        assert not isinstance(decision, Rejection), decision
        return decision

    def reject(self, command: Command, code: str) -> Rejection:
        before = self.state
        decision = self.decide(command)
        assert isinstance(decision, Rejection), decision
        assert decision.code == code, decision
        assert decision.code in REJECTION_CODES
        assert decision.as_error() == {"code": code, "message": decision.message}
        if isinstance(command, Submit | Finish) and before.finished is None:
            expected_type = SubmissionRejected if isinstance(command, Submit) else FinishRejected
            event = decision.event
            assert isinstance(event, expected_type)
            assert (event.code, event.message) == (code, decision.message)
            assert event.request_id == command.request_id
            # the log keeps the rejection; it consumes nothing but advances the stream
            assert self.events[-1] is event
            assert self.state.version == before.version + 1
            assert self.state.budget_used == before.budget_used
            assert self.state.submissions == before.submissions
            assert msgspec.structs.replace(self.state, version=before.version) == before
        else:
            assert decision.event is None
            assert self.state == before
        return decision

    def submit_cmd(
        self, selector: str, digest: str | None = DA, problem: str | None = None
    ) -> Submit:
        return Submit(
            request_id=f"req-{next(self.requests)}",
            selector=selector,
            program_digest=digest,
            problem=problem,
        )

    def finish_cmd(self, *candidates: int) -> Finish:
        return Finish(request_id=f"req-{next(self.requests)}", candidates=list(candidates))

    def submit(self, selector: str, digest: str = DA) -> EvaluationStarted:
        (started,) = self.accept(self.submit_cmd(selector, digest))
        assert isinstance(started, EvaluationStarted)
        return started

    def complete(self, score: float = 1.0, failures: int = 0) -> SubmissionPublished:
        pending = self.state.pending
        assert pending is not None
        events = self.accept(
            CompleteEvaluation(
                submission_id=pending.id,
                episodes=episodes_for(pending.indices),
                score=score,
                failures=failures,
            )
        )
        published = events[-1]
        assert isinstance(published, SubmissionPublished)
        assert [e.submission_id for e in events[:-1]] == [pending.id] * len(pending.indices)
        return published

    def publish(
        self, selector: str, digest: str = DA, score: float = 1.0, failures: int = 0
    ) -> int:
        started = self.submit(selector, digest)
        self.complete(score, failures)
        return started.submission_id

    def fail(self) -> EvaluationFailed:
        pending = self.state.pending
        assert pending is not None
        (failed,) = self.accept(FailEvaluation(submission_id=pending.id, error="env fault"))
        assert isinstance(failed, EvaluationFailed)
        return failed

    def finished(self) -> RunFinished:
        (done,) = self.accept(Conclude())
        assert isinstance(done, RunFinished)
        assert self.state.finished == done.reason
        assert fold(self.events) == self.state
        return done


def finished_state() -> RunState:
    run = Run(episode_budget=2)
    run.accept(StartAgent())
    run.accept(AgentExit(exit_code=0))
    run.finished()
    return run.state


def reopened(state: RunState) -> RunState:
    """White box: the same state with the session forced open again (unreachable by the rules)."""
    return msgspec.structs.replace(state, authority_open=True, evaluation_failed=False)


def validated_run(direction: str = "maximize", **kwargs: Any) -> Run:
    """An Agent that made three Submissions (train scores 1, 3, 2) and is still running."""
    run = Run(episode_budget=8, direction=direction, **kwargs)
    (started,) = run.accept(StartAgent(command=["agent", "--go"], pid=42))
    assert started == AgentStarted(attempt=1, command=["agent", "--go"], pid=42)
    run.publish("0:2", DA, score=1.0)
    run.publish("0:2", DB, score=3.0)
    run.publish("2:4", DC, score=2.0)
    return run


def render(draw: Callable[[st.SearchStrategy[Any]], Any], indices: list[int]) -> str:
    """Any rendering of increasing indices: runs cut anywhere, singles as ``i`` or ``i:i+1``."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(indices) + 1):
        if i < len(indices) and indices[i] == indices[i - 1] + 1 and draw(st.booleans()):
            continue
        first, last = indices[start], indices[i - 1]
        if first == last and draw(st.booleans()):
            parts.append(str(first))
        else:
            parts.append(f"{first}:{last + 1}")
        start = i
    pad = draw(st.sampled_from(["", " "]))
    return ",".join(f"{pad}{part}{pad}" for part in parts)


def evaluation_started(
    submission_id: int, indices: list[int], used: int, digest: str = DB
) -> Event:
    return EvaluationStarted(
        submission_id=submission_id,
        program_digest=digest,
        indices=indices,
        budget_reserved=len(indices),
        budget_used=used,
    )


@dataclass
class ModelSubmission:
    digest: str
    indices: tuple[int, ...]
    status: str = "evaluating"  # published, failed
    score: float | None = None
    failures: int | None = None


class Model:
    """What the Run should be, in plain Python, from DESIGN.md §4.2 and the brief's rules."""

    def __init__(self, config: RunConfig, direction: str) -> None:
        assert config.episode_pool_size is not None
        assert config.max_submissions is not None
        assert config.max_episodes_per_submission is not None
        self.config = config
        self.budget = config.episode_budget
        self.pool = config.episode_pool_size
        self.max_submissions = config.max_submissions
        self.max_episodes = config.max_episodes_per_submission
        self.must_spend = config.finish_budget_policy == "require_budget_exhaustion"
        self.max_candidates = config.validation.max_candidates
        self.validation_on = config.validation.enabled
        self.assessment_on = config.assessment.enabled
        self.max_attempts = config.max_agent_attempts
        self.maximize = direction == "maximize"
        self.legacy = config.legacy  # rules 1 (see run.config.RULES)
        self.host_nomination = config.host_nomination
        self.reference: tuple[float, int] | None = None  # the initial Program's (rules 2)
        self.used = 0
        self.subs: list[ModelSubmission] = []
        self.authority = True
        self.running = False
        self.attempts = 0
        self.chunks = 0
        self.exits: list[tuple[int | None, int | None]] = []
        self.finish: list[int] | None = None
        self.eval_failed = False
        self.candidates: list[int] | None = None  # once Validation has started
        self.validated: list[tuple[int, float, int]] = []
        self.validation_failed = False
        self.selected: int | None = None
        self.selected_score: float | None = None
        self.assessment = "not started"  # running, done, failed
        self.assessment_score: float | None = None
        self.interrupted = False
        self.resumes = 0
        self.finished: str | None = None

    # -- derived

    @property
    def pending(self) -> ModelSubmission | None:
        if self.subs and self.subs[-1].status == "evaluating":
            return self.subs[-1]
        return None

    @property
    def left(self) -> int:
        return self.budget - self.used

    def best_first(self, results: list[tuple[int, float, int]]) -> list[int]:
        """Two stable sorts (least significant key first) keep the given order among equals."""
        order = sorted(results, key=lambda r: r[2])
        order.sort(key=lambda r: r[1], reverse=self.maximize)
        return [r[0] for r in order]

    def nominated(self) -> list[int]:
        if self.finish is not None:
            return list(self.finish)
        if not (self.legacy or self.host_nomination):
            return []  # rules 2: no handoff, no candidates, unless the Run asked the Host
        published = [
            (number, sub.score or 0.0, sub.failures or 0)
            for number, sub in enumerate(self.subs, start=1)
            if sub.status == "published"
        ]
        return self.best_first(published)[: self.max_candidates]

    def phase(self) -> str:
        if self.finished is not None:
            return "finished"
        if self.pending is not None:
            return "evaluate"
        if self.authority:
            return "stop agent" if self.running else "start agent"
        if self.running:
            return "stop agent"
        if self.eval_failed or self.validation_failed or self.assessment == "failed":
            return "conclude"
        if self.selected is None:
            return "validate" if (self.candidates or self.nominated()) else "conclude"
        if self.assessment_on and self.assessment != "done":
            return "assess"
        return "conclude"

    @property
    def reference_due(self) -> bool:
        return (
            not self.legacy
            and self.candidates is not None
            and self.reference is None
            and self.selected is None
            and not self.validation_failed
        )

    def handoff(self) -> str:
        if self.finish is not None:
            return "agent"
        return "host" if self.candidates is not None or self.selected is not None else "none"

    def improved(self) -> bool | None:
        if self.selected is None or self.reference is None or self.selected_score is None:
            return None
        score, reference = self.selected_score, self.reference[0]
        return score > reference if self.maximize else score < reference

    def reason(self) -> str:
        if self.eval_failed:
            return "evaluation_failed"
        if self.validation_failed:
            return "validation_failed"
        if self.assessment == "failed":
            return "assessment_failed"
        if self.finish is not None:
            return "finished"
        if self.left == 0:
            return "budget_exhausted"
        code, signal = self.exits[-1] if self.exits else (None, None)
        return "agent_exited" if code == 0 and signal is None else "agent_failed"

    # -- the Agent's requests: the rejection code, or None when accepted

    def submit_code(
        self, indices: list[int] | None, digest: str | None, problem: str | None
    ) -> str | None:
        if self.finished is not None or self.interrupted or not self.authority:
            return "session_closed"
        if self.pending is not None:
            return "invalid_request"
        if problem is not None or digest is None:
            return "program_invalid"
        if indices is None or any(i >= self.pool for i in indices):
            return "invalid_request"
        if len(indices) > self.max_episodes:
            return "episode_limit"
        if len(self.subs) >= self.max_submissions:
            return "submission_limit"
        if self.left == 0:
            return "budget_exhausted"
        if len(indices) > self.left:
            return "budget_allocation"
        later_submissions = self.max_submissions - len(self.subs) - 1
        spendable_later = later_submissions * self.max_episodes
        if self.must_spend and self.left - len(indices) > spendable_later:
            return "budget_allocation"
        if self.legacy:  # rules 2 charge a repeat like any Submission
            for sub in self.subs:
                if sub.status != "failed" and (sub.digest, sub.indices) == (digest, tuple(indices)):
                    return "duplicate_submission"
        return None

    def finish_code(self, ids: list[int]) -> str | None:
        if self.finished is not None or self.interrupted or not self.authority:
            return "session_closed"
        if self.pending is not None or not ids:
            return "invalid_request"
        if len(set(ids)) < len(ids):
            return "duplicate_submission"
        if len(ids) > self.max_candidates:
            return "candidate_limit"
        published = {n for n, sub in enumerate(self.subs, start=1) if sub.status == "published"}
        if not set(ids) <= published:
            return "unknown_submission"
        if self.must_spend and self.left > 0:
            return "budget_remaining"
        return None

    # -- the Host's commands

    def accepts(self, command: Command) -> bool:
        if self.finished is not None:
            return False
        if self.interrupted and not isinstance(command, Resume | Interrupt):
            return False  # only RunResumed may follow RunInterrupted
        pending = self.pending
        match command:
            case StartAgent():
                return self.authority and not self.running and pending is None
            case AgentExit():
                return self.running
            case RecordMessages():
                return self.attempts > 0
            case CompleteEvaluation():
                return (
                    pending is not None
                    and command.submission_id == len(self.subs)
                    and tuple(e.index for e in command.episodes) == pending.indices
                )
            case FailEvaluation():
                return pending is not None and command.submission_id == len(self.subs)
            case StartValidation():
                return self.phase() == "validate" and self.candidates is None and self.validation_on
            case RecordReference():
                return self.reference_due and not self.validated
            case RecordCandidate():
                if self.candidates is None or self.selected is not None or self.validation_failed:
                    return False
                if self.reference_due:
                    return False  # rules 2: the initial Program first
                return command.submission_id == self.candidates[len(self.validated)]
            case FailValidation():
                return (
                    self.candidates is not None
                    and self.selected is None
                    and not self.validation_failed
                )
            case Select():
                return self.phase() == "validate" and not self.validation_on
            case StartAssessment():
                return self.phase() == "assess" and self.assessment == "not started"
            case CompleteAssessment() | FailAssessment():
                return self.assessment == "running"
            case Interrupt():
                return not self.interrupted
            case Resume():
                return self.interrupted
            case Conclude():
                return self.phase() == "conclude"
        raise AssertionError(f"unexpected command {command!r}")

    def apply(self, command: Command, events: list[Event]) -> None:
        """Follow an accepted Host command, checking the events it produced."""
        match command:
            case StartAgent() | AgentExit() | RecordMessages():
                self.apply_session(command, events)
            case CompleteEvaluation() | FailEvaluation():
                self.apply_session(command, events)
            case StartValidation() | RecordReference() | RecordCandidate() | FailValidation():
                self.apply_validation(command, events)
            case Select():
                self.apply_validation(command, events)
            case StartAssessment() | CompleteAssessment() | FailAssessment():
                self.apply_ending(command, events)
            case Interrupt() | Resume() | Conclude():
                self.apply_ending(command, events)
            case _:
                raise AssertionError(f"unexpected command {command!r}")

    def apply_session(self, command: Command, events: list[Event]) -> None:
        """The Agent's session: its attempts, transcript and evaluations."""
        pending = self.pending
        match command:
            case StartAgent():
                self.attempts += 1
                assert events == [
                    AgentStarted(attempt=self.attempts, command=command.command, pid=command.pid)
                ]
                self.running, self.chunks = True, 0
            case AgentExit():
                assert events == [
                    AgentExited(
                        attempt=self.attempts,
                        exit_code=command.exit_code,
                        signal=command.signal,
                        reason=command.reason,
                    )
                ]
                self.running, self.authority = False, False
                self.exits.append((command.exit_code, command.signal))
            case RecordMessages():
                assert events == [
                    AgentMessages(
                        attempt=self.attempts, chunk=self.chunks, messages=command.messages
                    )
                ]
                self.chunks += 1
            case CompleteEvaluation():
                assert pending is not None
                *episodes, published = events
                ran = [
                    (e.submission_id, e.index) for e in episodes if isinstance(e, EpisodeCompleted)
                ]
                assert ran == [(len(self.subs), i) for i in pending.indices] and len(ran) == len(
                    episodes
                )
                assert published == SubmissionPublished(
                    submission_id=len(self.subs),
                    program_digest=pending.digest,
                    score=command.score,
                    failures=command.failures,
                    budget_used=self.used,
                    budget_left=self.left,
                )
                pending.status = "published"
                pending.score, pending.failures = command.score, command.failures
            case FailEvaluation():
                assert pending is not None
                assert events == [
                    EvaluationFailed(
                        submission_id=len(self.subs),
                        error=command.error,
                        budget_consumed=len(pending.indices),
                    )
                ]
                pending.status = "failed"
                self.eval_failed, self.authority = True, False

    def apply_validation(self, command: Command, events: list[Event]) -> None:
        """Validation (the reference first, rules 2) and the final Submission's selection."""
        config = self.config
        match command:
            case StartValidation():
                self.candidates = self.nominated()
                assert events == [
                    ValidationStarted(
                        candidates=self.candidates,
                        split=config.validation.split,
                        episodes=config.validation.episodes_per_candidate,
                        seed=SEEDS["validation"],
                        handoff=None
                        if self.legacy
                        else ("agent" if self.finish is not None else "host"),
                    )
                ]
            case RecordReference():
                assert events == [
                    ReferenceValidated(
                        program_digest=P0, score=command.score, failures=command.failures
                    )
                ]
                self.reference = (command.score, command.failures)
            case RecordCandidate():
                assert self.candidates is not None
                result = (command.submission_id, command.score, command.failures)
                self.validated.append(result)
                assert events[0] == CandidateValidated(
                    submission_id=result[0], score=result[1], failures=result[2]
                )
                if len(self.validated) < len(self.candidates):
                    assert len(events) == 1
                else:
                    best = self.best_first(self.validated)[0]
                    score = next(r[1] for r in self.validated if r[0] == best)
                    selected = events[1]
                    assert len(events) == 2 and isinstance(selected, FinalSubmissionSelected)
                    assert (selected.submission_id, selected.score) == (best, score)
                    assert selected.program_digest == self.subs[best - 1].digest
                    self.selected, self.selected_score = best, score
            case FailValidation():
                assert events == [ValidationFailed(error=command.error)]
                self.validation_failed = True
            case Select():
                first = self.nominated()[0]
                (selected,) = events
                assert isinstance(selected, FinalSubmissionSelected)
                assert (selected.submission_id, selected.score) == (
                    first,
                    self.subs[first - 1].score,
                )
                self.selected, self.selected_score = first, self.subs[first - 1].score

    def apply_ending(self, command: Command, events: list[Event]) -> None:
        """Assessment, a Host crash and resume, and the Run's end."""
        config = self.config
        match command:
            case StartAssessment():
                assert events == [
                    AssessmentStarted(
                        submission_id=self.selected,
                        split=config.assessment.split,
                        episodes=config.assessment.episodes,
                        seed=SEEDS["assessment"],
                    )
                ]
                self.assessment = "running"
            case CompleteAssessment():
                assert events == [
                    AssessmentCompleted(
                        submission_id=self.selected, score=command.score, failures=command.failures
                    )
                ]
                self.assessment, self.assessment_score = "done", command.score
            case FailAssessment():
                assert events == [AssessmentFailed(error=command.error)]
                self.assessment = "failed"
            case Interrupt():
                assert events == [
                    RunInterrupted(reason=command.reason, last_position=command.last_position)
                ]
                self.interrupted = True
            case Resume():
                self.resumes += 1
                expected: list[Event] = [RunResumed(attempt=self.resumes)]
                if self.running:  # the Agent died with the Host
                    expected.append(AgentExited(attempt=self.attempts, reason=HOST_INTERRUPTED))
                    self.running = False
                    self.exits.append((None, None))
                    self.authority = self.authority and self.attempts < self.max_attempts
                assert events == expected
                self.interrupted = False
            case Conclude():
                reason = self.reason()
                assert events == [
                    RunFinished(
                        reason=reason,  # type: ignore[arg-type]
                        final_submission_id=self.selected,
                        validation_score=self.selected_score if self.validation_on else None,
                        assessment_score=self.assessment_score,
                        handoff=None if self.legacy else self.handoff(),  # type: ignore[arg-type]
                        reference_score=None
                        if self.legacy or self.reference is None
                        else self.reference[0],
                        improved=None if self.legacy else self.improved(),
                    )
                ]
                self.finished, self.interrupted, self.authority = reason, False, False

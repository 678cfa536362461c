"""A stateful property test of ``decide``/``evolve``/``fold``/``next_step`` against an
independent model of the Run (``support.decider.Model``), over rules 1 and 2.

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import itertools

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

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
    FinishAccepted,
    FinishRejected,
    ReferenceValidated,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationFailed,
    ValidationStarted,
    decode_event,
    encode_payload,
)
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.decider import (
    AgentExit,
    Assess,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Conclude,
    Evaluate,
    FailAssessment,
    FailEvaluation,
    FailValidation,
    Finish,
    Interrupt,
    InvalidTransition,
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
    StopAgent,
    Submit,
    Validate,
    decide,
    evolve,
    fold,
    next_step,
)
from evopolicygym.transcript import Message
from tests.support.decider import (
    AGENT,
    DA,
    DB,
    DC,
    DIRECTIONS,
    P0,
    Model,
    ModelSubmission,
    episodes_for,
    evaluation_started,
    make_create,
    render,
)


@st.composite
def run_configs(draw: st.DrawFn) -> RunConfig:
    rules = draw(st.sampled_from([1, 2]), label="rules")
    budget = draw(st.integers(1, 12), label="budget")
    pool = draw(st.none() | st.integers(1, 12), label="pool")
    pool_size = budget if pool is None else pool
    max_submissions = draw(st.none() | st.integers(1, 5), label="max_submissions")
    max_episodes = draw(st.none() | st.integers(1, pool_size), label="max_episodes")
    policy = draw(st.sampled_from(["allow_early", "require_budget_exhaustion"]), label="policy")
    episodes = pool_size if max_episodes is None else max_episodes
    if policy == "require_budget_exhaustion" and draw(st.booleans(), label="tight?"):
        max_submissions = -(-budget // episodes)  # just enough submissions to spend it all
    submissions = budget if max_submissions is None else max_submissions
    if submissions * episodes < budget:
        policy = "allow_early"  # require_budget_exhaustion could never be met
    config = RunConfig(
        episode_budget=budget,
        episode_pool_size=pool,
        max_submissions=max_submissions,
        max_episodes_per_submission=max_episodes,
        finish_budget_policy=policy,  # type: ignore[arg-type]
        validation=ValidationConfig(
            enabled=draw(st.integers(0, 3), label="validation") != 0,
            max_candidates=draw(st.integers(1, 4), label="max_candidates"),
            episodes_per_candidate=draw(st.integers(1, 4)),
        ),
        assessment=AssessmentConfig(
            enabled=draw(st.booleans(), label="assessment"), episodes=draw(st.integers(1, 4))
        ),
        max_agent_attempts=draw(st.integers(1, 3), label="max_agent_attempts"),
        rules=rules,
        host_nomination=rules == 2 and draw(st.booleans(), label="host nomination"),
    )
    return config.resolved()


BAD_SELECTORS = ["", " ", "x", "3:3", "2,1", "0:2,1", "1:", "-1", "a:b", "1,,2", "0:2:4"]


DIGESTS = [DA, DA, DB, DB, DC, None]


EXITS = [(0, None), (0, None), (1, None), (None, 9), (0, 15)]


SCORES = st.sampled_from([1.0, 1.0, 2.0, -1.5])  # ties: failures and order decide


HOST_COMMANDS = [
    "StartAgent",
    "AgentExit",
    "RecordMessages",
    "CompleteEvaluation",
    "FailEvaluation",
    "StartValidation",
    "RecordReference",
    "RecordCandidate",
    "FailValidation",
    "Select",
    "StartAssessment",
    "CompleteAssessment",
    "FailAssessment",
    "Conclude",
    "Interrupt",
    "Resume",
]


def forbidden_events(state: RunState, model: Model) -> list[Event]:
    """Events decide would never produce in ``state``: evolve must refuse every one."""
    return [
        *forbidden_anywhere(state, model),
        *forbidden_in_the_session(state, model),
        *forbidden_after_the_session(state, model),
        *forbidden_at_the_end(state, model),
    ]


def forbidden_anywhere(state: RunState, model: Model) -> list[Event]:
    """Events out of order or inconsistent with ``state``, whatever its phase."""
    n = len(state.submissions)
    used = state.budget_used
    left = model.left
    bad: list[Event] = [
        RunCreated(
            run_id="again",
            config=state.cfg.to_dict(),
            benchmark_id="toy",
            benchmark_spec={},
            environment_digest="e",
            initial_program_digest=P0,
            agent=AGENT,
            pool=[],
        ),
        SubmissionPublished(
            submission_id=n + 5,
            program_digest=DA,
            score=0.0,
            failures=0,
            budget_used=used,
            budget_left=left,
        ),
        # reserves without counting the reservation
        EvaluationStarted(
            submission_id=n + 1,
            program_digest=DA,
            indices=[0],
            budget_reserved=1,
            budget_used=used,
        ),
        # skips a Submission id
        evaluation_started(n + 2, [0], used + 1),
        # more than the budget
        EvaluationStarted(
            submission_id=n + 1,
            program_digest=DA,
            indices=list(range(left + 1)),
            budget_reserved=left + 1,
            budget_used=used + left + 1,
        ),
        # a reservation that is not the number of Episodes
        EvaluationStarted(
            submission_id=n + 1,
            program_digest=DA,
            indices=[0, 1],
            budget_reserved=1,
            budget_used=used + 1,
        ),
        # outside the pool, or not increasing
        evaluation_started(n + 1, [model.pool], used + 1),
        evaluation_started(n + 1, [0, 0], used + 2),
        EpisodeCompleted(submission_id=n + 3, index=0, status="ok", total_reward=0.0, steps=1),
        EvaluationFailed(submission_id=n + 3, error="x", budget_consumed=1),
        AgentExited(attempt=model.attempts + 1),
        AgentStarted(attempt=model.attempts + 2),
        AgentMessages(attempt=model.attempts, chunk=state.transcript_chunks + 1, messages=[]),
        CandidateValidated(submission_id=n + 7, score=0.0, failures=0),
        FinalSubmissionSelected(submission_id=n + 1, program_digest=DA, score=0.0),
        AssessmentStarted(submission_id=n + 9, split="assessment", episodes=1, seed=3),
        FinishAccepted(request_id="r", candidates=[n + 1]),
        RunResumed(attempt=model.resumes + 2),
    ]
    return bad


def forbidden_in_the_session(state: RunState, model: Model) -> list[Event]:
    """Events the Agent's session and its evaluations forbid here."""
    n = len(state.submissions)
    used = state.budget_used
    left = model.left
    bad: list[Event] = []
    if model.pending is not None:
        pending_id, digest = n, model.pending.digest
        bad += [
            SubmissionPublished(
                submission_id=pending_id,
                program_digest=digest + "x",
                score=0.0,
                failures=0,
                budget_used=used,
                budget_left=left,
            ),
            SubmissionPublished(
                submission_id=pending_id,
                program_digest=digest,
                score=0.0,
                failures=0,
                budget_used=used + 1,
                budget_left=left - 1,
            ),
            SubmissionPublished(
                submission_id=pending_id,
                program_digest=digest,
                score=0.0,
                failures=0,
                budget_used=used,
                budget_left=left + 1,
            ),
            EvaluationFailed(
                submission_id=pending_id, error="x", budget_consumed=len(model.pending.indices) + 1
            ),
            evaluation_started(
                n + 1, [0], used + 1
            ),  # consistent, but one is already being evaluated
            FinishAccepted(request_id="r", candidates=[pending_id]),
        ]
    if model.running:
        bad.append(AgentStarted(attempt=model.attempts + 1))
    else:
        bad.append(AgentExited(attempt=model.attempts))
    if not model.authority:
        bad.append(FinishAccepted(request_id="r", candidates=[1]))
        bad.append(evaluation_started(n + 1, [0], used + 1, DC + "new"))  # the session is closed
    if n >= model.max_submissions:
        bad.append(evaluation_started(n + 1, [0], used + 1, DC + "new"))
    if model.max_episodes + 1 <= model.pool:
        bad.append(
            evaluation_started(
                n + 1, list(range(model.max_episodes + 1)), used + model.max_episodes + 1
            )
        )
    return bad


def forbidden_after_the_session(state: RunState, model: Model) -> list[Event]:
    """Events Validation, selection and Assessment forbid here."""
    n = len(state.submissions)
    bad: list[Event] = []
    if model.authority or model.candidates is not None:
        bad.append(ValidationStarted(candidates=[1], split="validation", episodes=1, seed=2))
    if model.candidates is None or model.selected is not None or model.validation_failed:
        bad.append(ValidationFailed(error="x"))
    if not (model.reference_due and not model.validated):
        bad.append(ReferenceValidated(program_digest=P0, score=1.0, failures=0))
    else:
        bad.append(
            ReferenceValidated(program_digest=DA, score=1.0, failures=0)
        )  # not the initial one
        if model.candidates:  # no candidate before the reference (rules 2)
            bad.append(CandidateValidated(submission_id=model.candidates[0], score=1.0, failures=0))
    if model.assessment != "running":
        bad.append(AssessmentCompleted(submission_id=model.selected or 1, score=0.0, failures=0))
        bad.append(AssessmentFailed(error="x"))
    # at most one FinalSubmissionSelected is possible: the rules' choice, and only in its turn
    allowed = None
    if model.phase() == "validate" and not model.validation_on and model.nominated():
        allowed = model.nominated()[0]
    bad += [
        FinalSubmissionSelected(submission_id=k, program_digest=model.subs[k - 1].digest, score=0)
        for k in range(1, n + 1)
        if k != allowed
    ]
    return bad


def forbidden_at_the_end(state: RunState, model: Model) -> list[Event]:
    """Events an interrupted or finished Run, or the wrong ending, forbid here."""
    bad: list[Event] = []
    if model.interrupted:
        bad.append(RunInterrupted(reason="again"))
    else:
        bad.append(RunResumed(attempt=model.resumes + 1))
    reasons = [
        "finished",
        "agent_exited",
        "budget_exhausted",
        "agent_failed",
        "evaluation_failed",
        "validation_failed",
        "assessment_failed",
        "interrupted",
    ]
    bad += [
        RunFinished(reason=reason)  # type: ignore[arg-type]
        for reason in reasons
        if model.phase() != "conclude" or reason != model.reason() or not model.legacy
    ]
    if model.phase() == "conclude" and not model.legacy:
        # the right reason, but another handoff or improvement than the rules say
        right = dict(
            reason=model.reason(),
            final_submission_id=model.selected,
            validation_score=model.selected_score if model.validation_on else None,
            assessment_score=model.assessment_score,
            reference_score=None if model.reference is None else model.reference[0],
        )
        bad += [
            RunFinished(**right, handoff=h, improved=model.improved())  # type: ignore[arg-type]
            for h in ("agent", "host", "none")
            if h != model.handoff()
        ]
        bad.append(RunFinished(**right, handoff=model.handoff(), improved=not model.improved()))  # type: ignore[arg-type]
    if state.finished is not None:
        bad += [
            SubmissionRejected(request_id="r", code="session_closed", message="closed"),
            FinishRejected(request_id="r", code="session_closed", message="closed"),
            RunInterrupted(reason="x"),
        ]
    return bad


def roundtrip(event: Event) -> Event:
    return decode_event(event.type_name(), event.SCHEMA_VERSION, encode_payload(event))


class DeciderMachine(RuleBasedStateMachine):
    """Random Agent requests and Host commands against the independent Model."""

    def __init__(self) -> None:
        super().__init__()
        self.state = RunState()
        self.events: list[Event] = []
        self.model: Model | None = None
        self.requests = itertools.count(1)

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    def fold_in(self, events: list[Event]) -> None:
        for event in events:
            self.state = evolve(self.state, event)
        self.events.extend(events)

    @initialize(config=run_configs(), direction=st.sampled_from(DIRECTIONS))
    def create(self, config: RunConfig, direction: str) -> None:
        decision = decide(RunState(), make_create(config, direction))
        assert isinstance(decision, list)
        self.fold_in(decision)
        self.model = Model(config, direction)

    # ------------------------------------------------------------------ the Agent

    def agent_request(self, command: Submit | Finish, expected: str | None) -> list[Event]:
        before = self.state
        decision = decide(before, command)
        hypothesis_event(f"{type(command).__name__}: {expected or 'accepted'}")
        if expected is None:
            assert not isinstance(decision, Rejection), (command, decision)
            self.fold_in(decision)
            return decision
        assert isinstance(decision, Rejection), (command, decision, expected)
        assert decision.code == expected, (command, decision)
        event = decision.event
        if before.finished is not None or before.interrupted:
            assert event is None  # nothing is recorded on a stream that has ended or paused
            return []
        kind = SubmissionRejected if isinstance(command, Submit) else FinishRejected
        assert isinstance(event, kind)
        assert (event.code, event.message, event.request_id) == (
            decision.code,
            decision.message,
            command.request_id,
        )
        self.fold_in([event])
        assert self.state.version == before.version + 1
        assert msgspec.structs.replace(self.state, version=before.version) == before
        return []

    @rule(data=st.data())
    def submit(self, data: st.DataObject) -> None:
        self.submit_request(data)

    @rule(data=st.data())
    def submit_more(self, data: st.DataObject) -> None:  # the Agent's main work: twice as likely
        self.submit_request(data)

    def submit_request(self, data: st.DataObject) -> None:
        """A submit request, then (usually) its evaluation right away."""
        draw = data.draw
        indices: list[int] | None
        if draw(st.integers(0, 9), label="bad selector?") == 0:
            text, indices = draw(st.sampled_from(BAD_SELECTORS), label="selector"), None
        else:
            # now and then one past the end of the pool
            upto = (
                self.m.pool
                if draw(st.integers(0, 7), label="past the end?") == 0
                else self.m.pool - 1
            )
            most = upto + 1 if draw(st.integers(0, 3), label="many?") == 0 else min(upto + 1, 3)
            indices = draw(
                st.lists(st.integers(0, upto), min_size=1, max_size=most, unique=True).map(sorted),
                label="indices",
            )
            text = render(draw, indices)
        digest = draw(st.sampled_from([DA, DB, DC]), label="digest")
        problem = None
        if draw(st.integers(0, 11), label="no program?") == 0:
            digest, problem = draw(st.sampled_from([(None, None), (DA, "no policy.py")]))
        command = Submit(
            request_id=f"s{next(self.requests)}",
            selector=text,
            program_digest=digest,
            problem=problem,
        )
        expected = self.m.submit_code(indices, digest, problem)
        events = self.agent_request(command, expected)
        if expected is None:
            assert indices is not None and digest is not None
            number = len(self.m.subs) + 1
            parent = self.m.subs[-1].digest if self.m.subs else P0
            self.m.subs.append(ModelSubmission(digest=digest, indices=tuple(indices)))
            self.m.used += len(indices)
            assert events == [
                EvaluationStarted(
                    submission_id=number,
                    program_digest=digest,
                    parent_program_digest=parent,
                    indices=indices,
                    budget_reserved=len(indices),
                    budget_used=self.m.used,
                )
            ]
            if draw(st.integers(0, 3), label="evaluate now?") != 0:
                self.host(
                    CompleteEvaluation(
                        submission_id=number,
                        episodes=episodes_for(indices),
                        score=draw(SCORES, label="score"),
                        failures=draw(st.integers(0, 2), label="failures"),
                    )
                )

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        n = len(self.m.subs)
        published = [i for i, sub in enumerate(self.m.subs, start=1) if sub.status == "published"]
        how = data.draw(st.integers(0, 3), label="how to finish")
        if published and how < 2:  # a well-formed finish naming published Submissions
            ids = data.draw(
                st.lists(
                    st.sampled_from(published),
                    min_size=1,
                    max_size=self.m.max_candidates + how,
                    unique=True,
                ),
                label="candidates",
            )
        else:
            ids = data.draw(
                st.lists(st.integers(0, n + 1), max_size=self.m.max_candidates + 1),
                label="candidates",
            )
        request_id = f"f{next(self.requests)}"
        expected = self.m.finish_code(ids)
        events = self.agent_request(Finish(request_id=request_id, candidates=ids), expected)
        if expected is None:
            assert events == [FinishAccepted(request_id=request_id, candidates=ids)]
            self.m.finish, self.m.authority = list(ids), False

    # ------------------------------------------------------------------ the Host

    def host(self, command: Command) -> None:
        expected = self.m.accepts(command)
        decision = decide(self.state, command)
        hypothesis_event(f"{type(command).__name__}: {'accepted' if expected else 'refused'}")
        if not expected:
            assert isinstance(decision, Rejection), (command, decision)
            assert decision.code == "invalid_request" and decision.event is None
            return
        assert not isinstance(decision, Rejection), (command, decision)
        self.fold_in(decision)
        self.m.apply(command, decision)

    @rule(pid=st.none() | st.integers(1, 99))
    def start_agent(self, pid: int | None) -> None:
        self.host(StartAgent(command=["agent"], pid=pid))

    @rule(count=st.integers(0, 2))
    def record_messages(self, count: int) -> None:
        messages = [Message(role="assistant", content=f"m{i}") for i in range(count)]
        self.host(RecordMessages(messages=messages))

    @rule(crash=st.integers(0, 2), resume=st.integers(0, 3))
    def host_crash(self, crash: int, resume: int) -> None:
        """Now and then the Host dies (Interrupt) and, usually, comes back (Resume)."""
        if crash != 0 and not self.m.interrupted:
            return
        if not self.m.interrupted:
            self.host(Interrupt(reason="host crash", last_position=len(self.events)))
        if resume != 0 and self.m.interrupted:
            self.host(Resume())

    @rule(data=st.data(), steps=st.integers(1, 4))
    def host_in_turn(self, data: st.DataObject, steps: int) -> None:
        """A few of the steps next_step asks for (the Agent is stopped only now and then)."""
        for _ in range(steps):
            if not self.host_step(data):
                break

    def host_step(self, data: st.DataObject) -> bool:
        """One step; False when the Agent holds the session (leave it time to work)."""
        step = next_step(self.state)
        draw = data.draw
        command: Command
        match step:
            case Evaluate():
                if draw(st.integers(0, 9), label="fail evaluation?") == 0:
                    command = FailEvaluation(submission_id=step.submission_id, error="fault")
                else:
                    command = CompleteEvaluation(
                        submission_id=step.submission_id,
                        episodes=episodes_for(step.indices),
                        score=draw(SCORES, label="score"),
                        failures=draw(st.integers(0, 2), label="failures"),
                    )
            case StartAgent():
                command = StartAgent()
            case StopAgent():
                if self.state.authority_open and draw(st.integers(0, 5), label="stop?") != 0:
                    return False
                code, signal = draw(st.sampled_from(EXITS), label="exit")
                command = AgentExit(exit_code=code, signal=signal, reason="exited")
            case Validate():
                if not self.state.cfg.validation.enabled:
                    if draw(st.integers(0, 3), label="try validating?") == 0:
                        self.host(StartValidation())  # refused: Validation is disabled
                    command = Select()
                elif self.state.validation_candidates is None:
                    command = StartValidation()
                elif draw(st.integers(0, 9), label="fail validation?") == 0:
                    command = FailValidation(error="fault")
                elif step.reference:
                    command = RecordReference(
                        score=draw(SCORES, label="reference score"),
                        failures=draw(st.integers(0, 2), label="failures"),
                    )
                else:
                    done = len(self.state.validated)
                    command = RecordCandidate(
                        submission_id=self.state.validation_candidates[done],
                        score=draw(SCORES, label="score"),
                        failures=draw(st.integers(0, 2), label="failures"),
                    )
            case Assess():
                if not self.state.assessment_started:
                    command = StartAssessment()
                elif draw(st.integers(0, 5), label="fail assessment?") == 0:
                    command = FailAssessment(error="fault")
                else:
                    command = CompleteAssessment(score=draw(SCORES, label="score"), failures=0)
            case Conclude():
                command = Conclude()
            case _:
                raise AssertionError(f"unexpected step {step!r}")
        self.host(command)
        return not self.state.authority_open

    @rule(data=st.data())
    def host_out_of_turn(self, data: st.DataObject) -> None:
        """Any Host command, in turn or not: the Model says which must be refused."""
        draw = data.draw
        name = draw(st.sampled_from(HOST_COMMANDS), label="command")
        n = len(self.m.subs)
        pending = self.m.pending
        some_id = st.integers(0, n + 1)
        command: Command
        match name:
            case "StartAgent":
                command = StartAgent()
            case "AgentExit":
                code, signal = draw(st.sampled_from(EXITS), label="exit")
                command = AgentExit(exit_code=code, signal=signal)
            case "RecordMessages":
                command = RecordMessages(messages=[])
            case "CompleteEvaluation":
                if pending is not None and draw(st.booleans(), label="its Episodes?"):
                    indices = list(pending.indices)
                else:
                    indices = draw(st.lists(st.integers(0, self.m.pool), max_size=4))
                command = CompleteEvaluation(
                    submission_id=draw(some_id, label="id"),
                    episodes=episodes_for(indices),
                    score=0.0,
                    failures=0,
                )
            case "FailEvaluation":
                command = FailEvaluation(submission_id=draw(some_id, label="id"), error="x")
            case "StartValidation":
                command = StartValidation()
            case "RecordCandidate":
                command = RecordCandidate(
                    submission_id=draw(some_id, label="id"), score=draw(SCORES), failures=0
                )
            case "RecordReference":
                command = RecordReference(score=draw(SCORES), failures=0)
            case "FailValidation":
                command = FailValidation(error="x")
            case "Select":
                command = Select()
            case "StartAssessment":
                command = StartAssessment()
            case "CompleteAssessment":
                command = CompleteAssessment(score=draw(SCORES), failures=1)
            case "FailAssessment":
                command = FailAssessment(error="x")
            case "Conclude":
                command = Conclude()
            case "Resume":
                command = Resume()
            case _:
                command = Interrupt(reason="x")
        self.host(command)

    # ------------------------------------------------------------------ checks

    @invariant()
    def agrees_with_the_model(self) -> None:
        if self.model is None:
            return
        state, model = self.state, self.model
        assert state.budget_used == model.used <= model.budget
        reserved = sum(
            len(sub.indices)
            for sub in model.subs
            if sub.status in ("published", "failed", "evaluating")
        )
        assert state.budget_used == reserved == sum(len(s.indices) for s in state.submissions)
        assert [
            (s.id, s.program_digest, s.indices, s.status, s.score, s.failures)
            for s in state.submissions
        ] == [
            (number, s.digest, s.indices, s.status, s.score, s.failures)
            for number, s in enumerate(model.subs, start=1)
        ]
        assert state.authority_open == model.authority
        assert state.agent_running == model.running
        assert state.agent_attempts == model.attempts
        assert state.finish_candidates == (None if model.finish is None else tuple(model.finish))
        assert state.selected == model.selected
        assert state.interrupted == model.interrupted
        assert state.finished == model.finished
        assert state.evaluation_failed == model.eval_failed
        step = next_step(state)
        phase = model.phase()
        expected: dict[str, type] = {
            "finished": Conclude,
            "evaluate": Evaluate,
            "start agent": StartAgent,
            "stop agent": StopAgent,
            "validate": Validate,
            "assess": Assess,
            "conclude": Conclude,
        }
        assert isinstance(step, expected[phase]), (step, phase)
        if isinstance(step, Validate):
            assert list(step.candidates) == (model.candidates or model.nominated())
            assert step.reference == (
                model.validation_on and not model.legacy and model.reference is None
            )
        assert state.reference_score == (None if model.reference is None else model.reference[0])
        if isinstance(step, Evaluate):
            assert step.indices == model.subs[-1].indices

    @invariant()
    def folding_the_events_reproduces_the_state(self) -> None:
        assert self.state.version == len(self.events)
        assert fold(self.events) == self.state
        assert fold(roundtrip(event) for event in self.events) == self.state

    @invariant()
    def evolve_refuses_what_decide_would_not_produce(self) -> None:
        if self.model is None:
            return
        for event in forbidden_events(self.state, self.model):
            try:
                evolve(self.state, event)
            except InvalidTransition:
                continue
            raise AssertionError(f"evolve folded {event!r} in {self.state!r}")


DeciderMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


TestDecider = DeciderMachine.TestCase

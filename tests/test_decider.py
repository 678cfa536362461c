"""The Run decider: rejection codes, budget, selectors, selection, lifecycle, and a stateful
property test of ``decide``/``evolve``/``fold``/``next_step`` against an independent model.

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from evopolicygym.protocol import SelectorError, format_selector, parse_selector
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
    PoolEntry,
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
from evopolicygym.run.config import AssessmentConfig, RunConfig, RunConfigError, ValidationConfig
from evopolicygym.run.decider import (
    HOST_INTERRUPTED,
    REJECTION_CODES,
    AgentExit,
    Assess,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Conclude,
    Create,
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
    rank_candidates,
    terminal_reason,
)
from evopolicygym.transcript import AgentIdentity, Message

SEEDS = {"pool": 1, "validation": 2, "assessment": 3}
AGENT = AgentIdentity(name="t", provider="command")
P0 = "sha256:p0"  # the initial program
DA, DB, DC = "sha256:aa", "sha256:bb", "sha256:cc"
DIRECTIONS = ("maximize", "minimize")


# --------------------------------------------------------------------------- helpers


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


# --------------------------------------------------------------------------- 1. rejections


def test_rejection_codes_are_documented() -> None:
    assert set(REJECTION_CODES) >= {
        "invalid_request",
        "episode_limit",
        "submission_limit",
        "budget_exhausted",
        "budget_allocation",
        "program_invalid",
        "candidate_limit",
        "duplicate_submission",
        "unknown_submission",
        "budget_remaining",
        "session_closed",
    }
    assert all(message for message in REJECTION_CODES.values())


@pytest.mark.parametrize("when", ["not created", "finished"])
@pytest.mark.parametrize(
    "command",
    [
        Submit(request_id="late", selector="0", program_digest=DA),
        Finish(request_id="late", candidates=[1]),
    ],
    ids=["submit", "finish"],
)
def test_session_closed_when_there_is_no_live_run(when: str, command: Command) -> None:
    """No stream to record on: the rejection carries no event (one would never fold)."""
    state = RunState() if when == "not created" else finished_state()
    decision = decide(state, command)
    assert isinstance(decision, Rejection)
    assert decision.code == "session_closed"
    if decision.event is not None:  # if one is kept after all, it must fold
        assert evolve(state, decision.event).version == state.version + 1


def test_session_closed_after_finish() -> None:
    run = Run(episode_budget=4)
    first = run.publish("0:2")
    run.accept(run.finish_cmd(first))
    assert not run.state.authority_open
    run.reject(run.submit_cmd("2:4", DB), "session_closed")
    run.reject(run.finish_cmd(first), "session_closed")


def test_session_closed_after_the_agent_exits() -> None:
    run = Run(episode_budget=4)
    run.accept(StartAgent())
    run.publish("0")
    run.accept(AgentExit(exit_code=0))
    run.reject(run.submit_cmd("1", DB), "session_closed")
    run.reject(run.finish_cmd(1), "session_closed")


def test_session_closed_after_an_evaluation_failure() -> None:
    run = Run(episode_budget=4)
    run.submit("0")
    run.fail()
    run.reject(run.submit_cmd("1", DB), "session_closed")
    run.reject(run.finish_cmd(1), "session_closed")


def test_session_closed_wins_over_every_other_problem() -> None:
    run = Run(episode_budget=2)
    run.publish("0")
    run.accept(run.finish_cmd(1))
    run.reject(run.submit_cmd("junk", None, problem="no policy.py"), "session_closed")
    run.reject(run.finish_cmd(), "session_closed")


@pytest.mark.parametrize(
    "selector",
    ["", "   ", "x", "1:", ":3", "3:3", "4:2", "2,1", "0:3,2", "1,1", "-1", "1,,2", "1:2:3", "0x3"],
)
def test_invalid_request_for_a_bad_selector(selector: str) -> None:
    run = Run(episode_budget=8)
    rejection = run.reject(run.submit_cmd(selector), "invalid_request")
    assert rejection.message.startswith("--episodes: ")
    assert isinstance(rejection.event, SubmissionRejected)
    assert rejection.event.selector == selector


def test_invalid_request_for_an_index_outside_the_pool() -> None:
    run = Run(episode_budget=8, episode_pool_size=4)
    run.reject(run.submit_cmd("4"), "invalid_request")
    run.reject(run.submit_cmd("0,5"), "invalid_request")
    run.reject(run.submit_cmd("2:5"), "invalid_request")
    assert run.submit("3").indices == [3]  # the last index of the pool is fine


def test_invalid_request_while_a_submission_is_being_evaluated() -> None:
    run = Run(episode_budget=8)
    run.submit("0")
    run.reject(run.submit_cmd("1", DB), "invalid_request")
    # naming the pending one (or anything) in a finish waits for its evaluation too
    run.reject(run.finish_cmd(1), "invalid_request")


def test_a_finish_with_no_ids_is_invalid_and_with_a_repeated_id_a_duplicate() -> None:
    """duplicate_submission is the same id twice in one finish, as the protocol has it."""
    run = Run(episode_budget=8)
    first = run.publish("0")
    second = run.publish("1", DB)
    run.reject(run.finish_cmd(), "invalid_request")
    run.reject(run.finish_cmd(first, first), "duplicate_submission")
    run.reject(run.finish_cmd(first, second, first), "duplicate_submission")
    run.accept(run.finish_cmd(second, first))
    assert run.state.finish_candidates == (second, first)


def test_the_long_selector_is_kept_truncated_in_the_rejection() -> None:
    run = Run(episode_budget=8)
    selector = "1," * 600
    rejection = run.reject(run.submit_cmd(selector), "invalid_request")
    assert isinstance(rejection.event, SubmissionRejected)
    assert rejection.event.selector == selector[:1000]


@pytest.mark.parametrize(
    ("digest", "problem"), [(None, None), (None, "no policy.py"), (DA, "a symlink in the tree")]
)
def test_program_invalid(digest: str | None, problem: str | None) -> None:
    run = Run(episode_budget=4)
    rejection = run.reject(run.submit_cmd("0", digest, problem), "program_invalid")
    if problem is not None:
        assert problem in rejection.message


def test_episode_limit() -> None:
    run = Run(episode_budget=10, episode_pool_size=8, max_episodes_per_submission=3)
    run.reject(run.submit_cmd("0:4"), "episode_limit")
    run.reject(run.submit_cmd("0,2,4,6"), "episode_limit")
    assert run.submit("0:3").budget_reserved == 3


def test_submission_limit() -> None:
    run = Run(episode_budget=10, max_submissions=2)
    run.publish("0")
    run.publish("0", DB)
    assert run.state.budget_left == 8
    run.reject(run.submit_cmd("1", DC), "submission_limit")


def test_budget_exhausted() -> None:
    run = Run(episode_budget=3, episode_pool_size=4)
    run.publish("0:3")
    assert run.state.budget_left == 0
    run.reject(run.submit_cmd("3", DB), "budget_exhausted")


def test_budget_allocation_for_too_many_episodes() -> None:
    run = Run(episode_budget=5, episode_pool_size=8)
    run.publish("0:3")
    run.reject(run.submit_cmd("0:3", DB), "budget_allocation")
    assert run.submit("0:2", DB).budget_used == 5


def test_budget_allocation_when_the_budget_could_never_be_spent() -> None:
    # 2 submissions of at most 3 Episodes must spend all 6: each one must take 3
    run = Run(
        episode_budget=6,
        max_submissions=2,
        max_episodes_per_submission=3,
        finish_budget_policy="require_budget_exhaustion",
    )
    rejection = run.reject(run.submit_cmd("0:2"), "budget_allocation")
    assert "could never be spent" in rejection.message
    run.publish("0:3")
    run.reject(run.submit_cmd("0", DB), "budget_allocation")
    run.publish("3:6", DB)
    assert run.state.budget_left == 0


def test_budget_allocation_allows_every_split_that_can_still_be_spent() -> None:
    run = Run(
        episode_budget=6,
        max_submissions=3,
        max_episodes_per_submission=3,
        finish_budget_policy="require_budget_exhaustion",
    )
    run.publish("0")  # 5 left for 2 more submissions of at most 3: possible
    run.reject(run.submit_cmd("1", DB), "budget_allocation")  # 4 left for 1 of at most 3
    run.publish("1:3", DB)  # 3 left for 1 of at most 3: possible
    run.publish("0:3", DC)
    assert run.state.budget_left == 0
    run.accept(run.finish_cmd(1, 2, 3))


def test_allow_early_takes_any_split() -> None:
    run = Run(episode_budget=6, max_submissions=2, max_episodes_per_submission=3)
    run.publish("0")
    run.accept(run.finish_cmd(1))


def test_duplicate_submission_same_program_same_episodes() -> None:
    run = Run(episode_budget=12, episode_pool_size=6)
    first = run.publish("0:2", DA)
    rejection = run.reject(run.submit_cmd("0,1", DA), "duplicate_submission")
    assert f"Submission {first}" in rejection.message
    run.publish("0:3", DA)  # a different index set is allowed
    run.publish("0:2", DB)  # another program on the same Episodes too
    run.reject(run.submit_cmd("0:3", DA), "duplicate_submission")


def test_duplicate_submission_is_checked_after_the_limits() -> None:
    run = Run(episode_budget=2, episode_pool_size=4)
    run.publish("0:2", DA)
    run.reject(run.submit_cmd("0:2", DA), "budget_exhausted")


def test_a_failed_evaluation_does_not_count_as_a_duplicate() -> None:
    run = Run(episode_budget=8)
    run.submit("0:2", DA)
    run.fail()
    # A failed evaluation closes the session, so the rule is only visible white box.
    state = reopened(run.state)
    decision = decide(state, Submit(request_id="r", selector="0:2", program_digest=DA))
    assert isinstance(decision, list)
    (started,) = decision
    assert isinstance(started, EvaluationStarted)
    assert (started.submission_id, started.budget_used) == (2, 4)


def test_candidate_limit() -> None:
    run = Run(episode_budget=8, validation=ValidationConfig(max_candidates=2))
    for digest in (DA, DB, DC):
        run.publish("0", digest)
    run.reject(run.finish_cmd(1, 2, 3), "candidate_limit")
    run.accept(run.finish_cmd(3, 1))


@pytest.mark.parametrize("candidate", [0, -1, 3, 99])
def test_unknown_submission_for_an_unknown_id(candidate: int) -> None:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.publish("1", DB)
    run.reject(run.finish_cmd(1, candidate), "unknown_submission")


def test_unknown_submission_for_a_failed_evaluation() -> None:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.submit("1", DB)
    run.fail()
    # A failed evaluation closes the session, so the rule is only visible white box.
    state = reopened(run.state)
    decision = decide(state, Finish(request_id="r", candidates=[1, 2]))
    assert isinstance(decision, Rejection)
    assert decision.code == "unknown_submission"
    assert isinstance(decide(state, Finish(request_id="r", candidates=[1])), list)


def test_finish_naming_a_pending_submission_is_refused() -> None:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.submit("1", DB)
    # the pending check comes first, so this is invalid_request, not unknown_submission
    run.reject(run.finish_cmd(1, 2), "invalid_request")
    run.complete()
    run.accept(run.finish_cmd(1, 2))


def test_budget_remaining() -> None:
    run = Run(episode_budget=4, finish_budget_policy="require_budget_exhaustion")
    run.publish("0:2", DA)
    rejection = run.reject(run.finish_cmd(1), "budget_remaining")
    assert "2 Episodes" in rejection.message
    run.publish("2:4", DB)
    run.accept(run.finish_cmd(2, 1))


def test_finish_is_checked_in_order_candidate_limit_then_unknown_then_budget() -> None:
    run = Run(
        episode_budget=4,
        finish_budget_policy="require_budget_exhaustion",
        validation=ValidationConfig(max_candidates=1),
    )
    run.publish("0", DA)
    run.reject(run.finish_cmd(1, 7), "candidate_limit")
    run.reject(run.finish_cmd(7), "unknown_submission")
    run.reject(run.finish_cmd(1), "budget_remaining")


# --------------------------------------------------------------------------- 2. budget


def test_config_defaults_resolve_from_the_budget() -> None:
    config = make_config(episode_budget=7)
    assert (config.pool_size, config.submission_limit, config.episode_limit) == (7, 7, 7)
    config = make_config(episode_budget=7, episode_pool_size=5)
    assert (config.pool_size, config.submission_limit, config.episode_limit) == (5, 7, 5)
    config = make_config(episode_budget=7, max_submissions=2, max_episodes_per_submission=4)
    assert (config.pool_size, config.submission_limit, config.episode_limit) == (7, 2, 4)
    assert config.resolved() == config
    assert RunConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "kwargs",
    [
        {"episode_budget": 0},
        {"episode_budget": 4, "episode_pool_size": 0},
        {"episode_budget": 4, "max_submissions": 0},
        {"episode_budget": 4, "episode_pool_size": 3, "max_episodes_per_submission": 4},
        {
            "episode_budget": 7,
            "max_submissions": 2,
            "max_episodes_per_submission": 3,
            "finish_budget_policy": "require_budget_exhaustion",
        },
        {"validation": ValidationConfig(max_candidates=0)},
        {"max_agent_attempts": 0},
    ],
)
def test_config_that_cannot_work_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(RunConfigError):
        make_config(**kwargs)


def test_budget_is_reserved_when_the_evaluation_starts() -> None:
    run = Run(episode_budget=10, episode_pool_size=6)
    started = run.submit("0:2,4", DA)
    assert started.indices == [0, 1, 4]
    assert (started.budget_reserved, started.budget_used) == (3, 3)
    assert started.parent_program_digest == P0
    assert run.state.budget_used == 3 and run.state.budget_left == 7
    published = run.complete(score=2.5, failures=1)
    assert (published.budget_used, published.budget_left) == (3, 7)
    assert published.program_digest == DA
    assert (published.score, published.failures) == (2.5, 1)
    started = run.submit("5", DB)
    assert (started.submission_id, started.budget_used) == (2, 4)
    assert started.parent_program_digest == DA
    published = run.complete()
    assert (published.budget_used, published.budget_left) == (4, 6)


def test_budget_is_kept_after_an_evaluation_failure() -> None:
    run = Run(episode_budget=10, episode_pool_size=6)
    run.publish("0", DA)
    run.submit("1:4", DB)
    failed = run.fail()
    assert failed.budget_consumed == 3
    assert run.state.budget_used == 4
    assert [s.status for s in run.state.submissions] == ["published", "failed"]


def test_a_rejection_consumes_nothing() -> None:
    run = Run(episode_budget=3)
    run.publish("0:2", DA)
    before = run.state
    run.reject(run.submit_cmd("0:2", DB), "budget_allocation")
    run.reject(run.submit_cmd("0:2", DA), "budget_allocation")
    assert run.state.budget_used == before.budget_used == 2
    assert run.state.version == before.version + 2


def test_complete_evaluation_must_run_the_reserved_episodes() -> None:
    run = Run(episode_budget=10)
    run.submit("0:3")
    for episodes in ([0, 1], [0, 2, 1], [0, 1, 2, 3]):
        run.reject(
            CompleteEvaluation(
                submission_id=1, episodes=episodes_for(episodes), score=0.0, failures=0
            ),
            "invalid_request",
        )
    run.reject(
        CompleteEvaluation(submission_id=2, episodes=episodes_for([0, 1, 2]), score=0, failures=0),
        "invalid_request",
    )
    run.reject(FailEvaluation(submission_id=2, error="x"), "invalid_request")
    run.complete()
    run.reject(FailEvaluation(submission_id=1, error="x"), "invalid_request")


# --------------------------------------------------------------------------- 3. selectors


increasing_indices = st.lists(
    st.integers(min_value=0, max_value=10**6), min_size=1, max_size=40, unique=True
).map(sorted)


def runs_of(indices: list[int]) -> int:
    return 1 + sum(1 for a, b in itertools.pairwise(indices) if b != a + 1)


@given(increasing_indices)
def test_selector_round_trip(indices: list[int]) -> None:
    text = format_selector(indices)
    assert parse_selector(text) == indices
    assert text.count(",") + 1 == runs_of(indices)  # the shortest form: one part per run


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


@st.composite
def rendered_selectors(draw: st.DrawFn) -> tuple[str, list[int]]:
    indices = draw(increasing_indices)
    return render(draw, indices), indices


@given(rendered_selectors())
def test_every_rendering_parses_to_its_indices(case: tuple[str, list[int]]) -> None:
    text, indices = case
    assert parse_selector(text) == indices


@given(increasing_indices, st.data())
def test_overlapping_or_decreasing_parts_are_refused(
    indices: list[int], data: st.DataObject
) -> None:
    again = data.draw(st.integers(min_value=0, max_value=indices[-1]), label="not after the end")
    text = f"{format_selector(indices)},{again}"
    with pytest.raises(SelectorError, match="strictly increasing"):
        parse_selector(text)
    stop = data.draw(st.integers(min_value=again + 1, max_value=again + 5))
    with pytest.raises(SelectorError, match="strictly increasing"):
        parse_selector(f"{format_selector(indices)},{again}:{stop}")


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_empty_ranges_are_refused(start: int, shorter: int) -> None:
    stop = min(start, shorter)
    with pytest.raises(SelectorError, match="empty range"):
        parse_selector(f"{start}:{stop}")


GRAMMAR_CHARS = set("0123456789:,") | {chr(c) for c in range(128) if chr(c).isspace()}


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=30))
def test_ascii_junk_is_refused(text: str) -> None:
    if set(text) <= GRAMMAR_CHARS:
        return  # may be a selector; covered above
    with pytest.raises(SelectorError):
        parse_selector(text)


@pytest.mark.parametrize(
    "text", ["", " ", ",", "1,", ",1", "1:", ":", "1::2", "1:2:3", "1 2", "1234567890", "+1", "1.0"]
)
def test_grammar_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_selector_size_limits() -> None:
    with pytest.raises(SelectorError, match="longer than"):
        parse_selector("1" * 1001)
    with pytest.raises(SelectorError, match="1,000,000"):
        parse_selector("0:1000001")
    assert len(parse_selector("0:1000000")) == 1_000_000
    assert issubclass(SelectorError, ValueError)


@pytest.mark.parametrize("text", ["\uff13", "\u0663:\u0665", "\u0663", "1:\uff15"])
def test_non_ascii_digits_are_refused(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


# --------------------------------------------------------------------------- 4. ranking


def oracle_rank(results: list[tuple[int, float, int]], direction: str) -> list[int]:
    """Selection sort with explicit comparisons: repeatedly take the best that is left."""

    def better(
        a: tuple[int, tuple[int, float, int]], b: tuple[int, tuple[int, float, int]]
    ) -> bool:
        (pos_a, (_, score_a, fail_a)), (pos_b, (_, score_b, fail_b)) = a, b
        if score_a != score_b:
            return score_a > score_b if direction == "maximize" else score_a < score_b
        if fail_a != fail_b:
            return fail_a < fail_b
        return pos_a < pos_b

    left = list(enumerate(results))
    out: list[int] = []
    while left:
        best = left[0]
        for item in left[1:]:
            if better(item, best):
                best = item
        left.remove(best)
        out.append(best[1][0])
    return out


scores = st.sampled_from([-1.0, 0.0, 0.5, 2.0]) | st.floats(
    allow_nan=False, allow_infinity=False, width=32
)


@given(
    st.lists(st.tuples(scores, st.integers(0, 3)), max_size=12),
    st.sampled_from(DIRECTIONS),
)
def test_rank_candidates_matches_an_oracle(pairs: list[tuple[float, int]], direction: str) -> None:
    results = [(10 + i, score, failures) for i, (score, failures) in enumerate(pairs)]
    ranked = rank_candidates(results, direction)
    assert ranked == oracle_rank(results, direction)
    assert sorted(ranked) == [r[0] for r in results]


def test_rank_candidates_examples() -> None:
    results = [(1, 2.0, 0), (2, 3.0, 5), (3, 3.0, 1), (4, 1.0, 0), (5, 3.0, 1)]
    assert rank_candidates(results, "maximize") == [3, 5, 2, 1, 4]
    assert rank_candidates(results, "minimize") == [4, 1, 3, 5, 2]
    assert rank_candidates(iter(results), "maximize")[0] == 3
    assert rank_candidates([], "maximize") == []


# --------------------------------------------------------------------------- 5. lifecycle


def validated_run(direction: str = "maximize", **kwargs: Any) -> Run:
    """An Agent that made three Submissions (train scores 1, 3, 2) and is still running."""
    run = Run(episode_budget=8, direction=direction, **kwargs)
    (started,) = run.accept(StartAgent(command=["agent", "--go"], pid=42))
    assert started == AgentStarted(attempt=1, command=["agent", "--go"], pid=42)
    run.publish("0:2", DA, score=1.0)
    run.publish("0:2", DB, score=3.0)
    run.publish("2:4", DC, score=2.0)
    return run


def test_full_lifecycle_finished() -> None:
    run = validated_run()
    assert next_step(run.state) == StopAgent()
    (messages,) = run.accept(RecordMessages(messages=[Message(role="assistant", content="hi")]))
    assert isinstance(messages, AgentMessages) and (messages.attempt, messages.chunk) == (1, 0)
    (accepted,) = run.accept(run.finish_cmd(1, 2, 3))
    assert isinstance(accepted, FinishAccepted) and accepted.candidates == [1, 2, 3]
    assert not run.state.authority_open
    assert next_step(run.state) == StopAgent()  # the Agent is still running
    run.reject(StartValidation(), "invalid_request")
    (exited,) = run.accept(AgentExit(exit_code=0, reason="done"))
    assert exited == AgentExited(attempt=1, exit_code=0, reason="done")
    assert next_step(run.state) == Validate(candidates=(1, 2, 3))
    run.reject(RecordCandidate(submission_id=1, score=0, failures=0), "invalid_request")
    run.reject(StartAssessment(), "invalid_request")
    run.reject(Conclude(), "invalid_request")
    run.reject(Select(), "invalid_request")  # Validation is enabled
    (started,) = run.accept(StartValidation())
    assert started == ValidationStarted(
        candidates=[1, 2, 3], split="validation", episodes=16, seed=2
    )
    run.reject(StartValidation(), "invalid_request")
    run.reject(RecordCandidate(submission_id=2, score=0, failures=0), "invalid_request")
    assert run.accept(RecordCandidate(submission_id=1, score=5.0, failures=0)) == [
        CandidateValidated(submission_id=1, score=5.0, failures=0)
    ]
    assert len(run.accept(RecordCandidate(submission_id=2, score=7.0, failures=1))) == 1
    assert next_step(run.state) == Validate(candidates=(1, 2, 3))
    last = run.accept(RecordCandidate(submission_id=3, score=7.0, failures=0))
    assert last[0] == CandidateValidated(submission_id=3, score=7.0, failures=0)
    selected = last[1]
    assert isinstance(selected, FinalSubmissionSelected)
    assert (selected.submission_id, selected.program_digest, selected.score) == (3, DC, 7.0)
    run.reject(RecordCandidate(submission_id=3, score=7.0, failures=0), "invalid_request")
    run.reject(FailValidation(error="late"), "invalid_request")
    assert next_step(run.state) == Assess(submission_id=3)
    run.reject(CompleteAssessment(score=1.0, failures=0), "invalid_request")
    (assessing,) = run.accept(StartAssessment())
    assert assessing == AssessmentStarted(submission_id=3, split="assessment", episodes=32, seed=3)
    run.reject(StartAssessment(), "invalid_request")
    run.reject(Conclude(), "invalid_request")
    (assessed,) = run.accept(CompleteAssessment(score=6.5, failures=0))
    assert isinstance(assessed, AssessmentCompleted) and assessed.submission_id == 3
    run.reject(FailAssessment(error="late"), "invalid_request")
    assert next_step(run.state) == Conclude()
    done = run.finished()
    assert done == RunFinished(
        reason="finished", final_submission_id=3, validation_score=7.0, assessment_score=6.5
    )
    for command in (Conclude(), StartAgent(), Resume(), Interrupt(reason="x"), StartValidation()):
        run.reject(command, "invalid_request")


def test_validation_ranks_in_the_benchmarks_direction() -> None:
    run = validated_run("minimize")
    run.accept(run.finish_cmd(3, 1, 2))
    run.accept(AgentExit(exit_code=0))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=3, score=4.0, failures=0))
    run.accept(RecordCandidate(submission_id=1, score=2.0, failures=3))
    *_, selected = run.accept(RecordCandidate(submission_id=2, score=2.0, failures=3))
    assert isinstance(selected, FinalSubmissionSelected)
    assert selected.submission_id == 1  # tie on score and failures: finish order


@pytest.mark.parametrize(
    ("direction", "exit_code", "signal", "nominated", "reason"),
    [
        ("maximize", 0, None, (2, 3), "agent_exited"),
        ("minimize", 0, None, (1, 3), "agent_exited"),
        ("maximize", 1, None, (2, 3), "agent_failed"),
        ("maximize", None, 9, (2, 3), "agent_failed"),
        ("maximize", 0, 15, (2, 3), "agent_failed"),
    ],
)
def test_agent_exits_without_finishing(
    direction: str,
    exit_code: int | None,
    signal: int | None,
    nominated: tuple[int, ...],
    reason: str,
) -> None:
    run = validated_run(direction, validation=ValidationConfig(max_candidates=2))
    run.accept(AgentExit(exit_code=exit_code, signal=signal))
    assert not run.state.authority_open
    assert run.state.finish_candidates is None
    assert next_step(run.state) == Validate(candidates=nominated)
    run.accept(StartValidation())
    for candidate in nominated:
        run.accept(RecordCandidate(submission_id=candidate, score=1.0, failures=0))
    assert run.state.selected == nominated[0]
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=0.0, failures=0))
    assert terminal_reason(run.state) == reason
    assert run.finished().reason == reason


@pytest.mark.parametrize("exit_code", [0, 2])
def test_agent_exits_with_the_budget_spent(exit_code: int) -> None:
    run = Run(episode_budget=4, assessment=AssessmentConfig(enabled=False))
    run.accept(StartAgent())
    run.publish("0:2", DA, score=1.0)
    run.publish("2:4", DB, score=2.0)
    run.reject(run.submit_cmd("0", DC), "budget_exhausted")
    run.accept(AgentExit(exit_code=exit_code))
    assert next_step(run.state) == Validate(candidates=(2, 1))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=2, score=1.0, failures=0))
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    done = run.finished()
    assert (done.reason, done.final_submission_id) == ("budget_exhausted", 2)


def test_a_finish_that_spent_the_whole_budget_is_finished() -> None:
    run = Run(
        episode_budget=4,
        finish_budget_policy="require_budget_exhaustion",
        assessment=AssessmentConfig(enabled=False),
    )
    run.accept(StartAgent())
    run.publish("0:2", DA, score=1.0)
    run.publish("2:4", DB, score=2.0)
    run.accept(run.finish_cmd(1))
    run.accept(AgentExit(exit_code=3))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    assert run.finished() == RunFinished(
        reason="finished", final_submission_id=1, validation_score=1.0
    )


def test_agent_exits_with_no_submission() -> None:
    run = Run(episode_budget=4)
    run.accept(StartAgent())
    run.reject(run.finish_cmd(1), "unknown_submission")
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Conclude()
    run.reject(StartValidation(), "invalid_request")
    done = run.finished()
    assert done == RunFinished(reason="agent_exited")


def test_an_evaluation_failure_ends_the_run() -> None:
    run = Run(episode_budget=6)
    run.accept(StartAgent())
    run.publish("0", DA)
    started = run.submit("1:3", DB)
    assert next_step(run.state) == Evaluate(submission_id=2, program_digest=DB, indices=(1, 2))
    run.reject(StartAgent(), "invalid_request")
    failed = run.fail()
    assert failed == EvaluationFailed(submission_id=2, error="env fault", budget_consumed=2)
    assert run.state.budget_used == started.budget_used == 3
    assert not run.state.authority_open and run.state.evaluation_failed
    assert next_step(run.state) == StopAgent()
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Conclude()
    run.reject(StartValidation(), "invalid_request")
    done = run.finished()
    assert done == RunFinished(reason="evaluation_failed")


def test_an_agent_exit_while_evaluating_lets_the_evaluation_finish() -> None:
    run = Run(episode_budget=6)
    run.accept(StartAgent())
    run.submit("0:2", DA)
    run.accept(AgentExit(exit_code=0))
    assert isinstance(next_step(run.state), Evaluate)
    run.complete(score=4.0)
    assert next_step(run.state) == Validate(candidates=(1,))


def test_validation_disabled_selects_the_first_candidate_on_its_train_score() -> None:
    run = validated_run(validation=ValidationConfig(enabled=False))
    run.accept(run.finish_cmd(3, 2))
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Validate(candidates=(3, 2))
    (selected,) = run.accept(Select())
    assert isinstance(selected, FinalSubmissionSelected)
    assert (selected.submission_id, selected.program_digest, selected.score) == (3, DC, 2.0)
    run.reject(Select(), "invalid_request")
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=1.5, failures=0))
    done = run.finished()
    assert done == RunFinished(
        reason="finished", final_submission_id=3, validation_score=None, assessment_score=1.5
    )


def test_validation_disabled_without_finish_selects_the_best_train_score() -> None:
    run = validated_run(validation=ValidationConfig(enabled=False))
    run.accept(AgentExit(exit_code=0))
    (selected,) = run.accept(Select())
    assert isinstance(selected, FinalSubmissionSelected)
    assert (selected.submission_id, selected.score) == (2, 3.0)


def test_assessment_disabled() -> None:
    run = validated_run(assessment=AssessmentConfig(enabled=False))
    run.accept(run.finish_cmd(1))
    run.accept(AgentExit(exit_code=0))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=2.0, failures=0))
    assert next_step(run.state) == Conclude()
    run.reject(StartAssessment(), "invalid_request")
    done = run.finished()
    assert done == RunFinished(
        reason="finished", final_submission_id=1, validation_score=2.0, assessment_score=None
    )


def test_validation_failure_and_assessment_failure() -> None:
    run = validated_run()
    run.accept(run.finish_cmd(1, 2))
    run.accept(AgentExit(exit_code=0))
    run.reject(FailValidation(error="x"), "invalid_request")
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=2.0, failures=0))
    (failed,) = run.accept(FailValidation(error="benchmark fault"))
    assert failed == ValidationFailed(error="benchmark fault")
    run.reject(RecordCandidate(submission_id=2, score=2.0, failures=0), "invalid_request")
    assert next_step(run.state) == Conclude()
    assert run.finished() == RunFinished(reason="validation_failed")

    run = validated_run()
    run.accept(run.finish_cmd(1))
    run.accept(AgentExit(exit_code=0))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=2.0, failures=0))
    run.reject(FailAssessment(error="x"), "invalid_request")
    run.accept(StartAssessment())
    (failed_assessment,) = run.accept(FailAssessment(error="benchmark fault"))
    assert failed_assessment == AssessmentFailed(error="benchmark fault")
    run.reject(CompleteAssessment(score=1.0, failures=0), "invalid_request")
    assert next_step(run.state) == Conclude()
    done = run.finished()
    assert done == RunFinished(
        reason="assessment_failed", final_submission_id=1, validation_score=2.0
    )


def test_a_host_crash_under_the_agent_keeps_the_session_while_attempts_remain() -> None:
    run = Run(episode_budget=6, max_agent_attempts=2)
    run.accept(StartAgent())
    run.accept(RecordMessages(messages=[Message(role="user", content="go")]))
    run.publish("0", DA, score=1.0)
    (interrupted,) = run.accept(Interrupt(reason="SIGKILL", last_position=9))
    assert interrupted == RunInterrupted(reason="SIGKILL", last_position=9)
    run.reject(Interrupt(reason="again"), "invalid_request")
    resumed = run.accept(Resume())
    assert resumed == [
        RunResumed(attempt=1),
        AgentExited(attempt=1, reason=HOST_INTERRUPTED),
    ]
    assert run.state.authority_open and not run.state.agent_running
    assert not run.state.interrupted
    assert next_step(run.state) == StartAgent()
    run.publish("1", DB, score=2.0)  # the session is still open
    (restarted,) = run.accept(StartAgent())
    assert restarted == AgentStarted(attempt=2)
    (chunk,) = run.accept(RecordMessages(messages=[]))
    assert isinstance(chunk, AgentMessages) and (chunk.attempt, chunk.chunk) == (2, 0)
    run.accept(Interrupt(reason="SIGKILL"))
    resumed = run.accept(Resume())
    assert resumed == [RunResumed(attempt=2), AgentExited(attempt=2, reason=HOST_INTERRUPTED)]
    assert not run.state.authority_open  # both attempts are used up
    run.reject(run.submit_cmd("2", DC), "session_closed")
    run.reject(StartAgent(), "invalid_request")
    assert next_step(run.state) == Validate(candidates=(2, 1))
    assert terminal_reason(run.state) == "agent_failed"


def test_a_host_crash_while_the_agent_is_not_running() -> None:
    run = Run(episode_budget=6, max_agent_attempts=1)
    run.submit("0", DA)
    run.accept(Interrupt(reason="SIGKILL"))
    assert run.accept(Resume()) == [RunResumed(attempt=1)]
    assert run.state.authority_open
    assert isinstance(next_step(run.state), Evaluate)
    run.complete()
    assert next_step(run.state) == StartAgent()


def test_a_host_crash_after_finish_closes_nothing_new() -> None:
    run = validated_run(max_agent_attempts=3)
    run.accept(run.finish_cmd(2))
    run.accept(Interrupt(reason="SIGKILL"))
    resumed = run.accept(Resume())
    assert resumed[1] == AgentExited(attempt=1, reason=HOST_INTERRUPTED)
    assert not run.state.authority_open  # the finish ended the session already
    assert next_step(run.state) == Validate(candidates=(2,))


def test_an_interrupted_run_takes_nothing_until_resumed_and_nothing_follows_the_end() -> None:
    run = Run(episode_budget=2)
    run.accept(StartAgent())
    run.accept(AgentExit(exit_code=0))
    run.accept(Interrupt(reason="stop"))
    for command in (Conclude(), StartAgent(), StartValidation()):
        run.reject(command, "invalid_request")
    run.accept(Resume())
    done = run.finished()
    assert done.reason == "agent_exited" and not run.state.interrupted
    run.reject(Interrupt(reason="again"), "invalid_request")


def test_create_twice_and_commands_before_create_are_refused() -> None:
    config = make_config(episode_budget=3)
    run = Run(config)
    (created,) = run.events
    assert isinstance(created, RunCreated)
    assert created.config == config.to_dict() and created.seeds == SEEDS
    assert run.state.cfg == config and run.state.pool == tuple(make_pool(3))
    assert run.state.authority_open and run.state.version == 1
    run.reject(make_create(config), "invalid_request")
    for command in (StartAgent(), Conclude(), StartValidation(), Interrupt(reason="x")):
        decision = decide(RunState(), command)
        assert isinstance(decision, Rejection) and decision.code == "invalid_request"
    assert isinstance(next_step(run.state), StartAgent)


# --------------------------------------------------------------------------- guards


def test_resume_needs_an_interrupted_run() -> None:
    decision = decide(RunState(), Resume())
    assert isinstance(decision, Rejection) and decision.code == "invalid_request"
    run = Run(episode_budget=4)
    run.accept(StartAgent())
    run.reject(Resume(), "invalid_request")  # a live Run: the Agent must not be declared dead
    assert run.state.agent_running
    run.accept(Interrupt(reason="SIGKILL"))
    run.accept(Resume())
    run.reject(Resume(), "invalid_request")


def test_start_validation_is_refused_when_validation_is_disabled() -> None:
    run = validated_run(validation=ValidationConfig(enabled=False))
    run.accept(AgentExit(exit_code=0))
    assert isinstance(next_step(run.state), Validate)
    run.reject(StartValidation(), "invalid_request")
    run.accept(Select())


def agent_phase_state() -> RunState:
    """An Agent holding the session, with Submission 1 published (1 of 8 Episodes used)."""
    run = Run(episode_budget=8, episode_pool_size=4)
    run.accept(StartAgent())
    run.publish("0", DA)
    return run.state


def pending_state() -> RunState:
    run = Run(episode_budget=8)
    run.submit("0", DA)
    return run.state


def closed_state() -> RunState:
    """The Agent finished with Submission 1 (of 8 Episodes, 1 used) and is still running."""
    run = Run(episode_budget=8, episode_pool_size=4)
    run.accept(StartAgent())
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    return run.state


def two_published_state(**kwargs: Any) -> RunState:
    run = Run(episode_budget=8, **kwargs)
    run.publish("0", DA, score=1.0)
    run.publish("1", DB, score=2.0)
    return run.state


def validating_state() -> RunState:
    """Validation of candidates (1, 2) started, none recorded yet."""
    run = Run(episode_budget=8)
    run.publish("0", DA, score=1.0)
    run.publish("1", DB, score=2.0)
    run.accept(run.finish_cmd(1, 2))
    run.accept(StartValidation())
    return run.state


def selected_state(**kwargs: Any) -> RunState:
    """Submission 1 validated and selected; the next step is Assessment or Conclude."""
    run = Run(episode_budget=8, **kwargs)
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    return run.state


def last_candidate_validated_state() -> RunState:
    """The last candidate's CandidateValidated folded, its FinalSubmissionSelected not yet."""
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    run.accept(StartValidation())
    return evolve(run.state, CandidateValidated(submission_id=1, score=1.0, failures=0))


def assessed_state() -> RunState:
    run = Run(episode_budget=8)
    run.publish("0", DA)
    run.accept(run.finish_cmd(1))
    run.accept(StartValidation())
    run.accept(RecordCandidate(submission_id=1, score=1.0, failures=0))
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=1.0, failures=0))
    return run.state


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


Case = tuple[str, Callable[[], RunState], Event]

EVOLVE_REFUSES: list[Case] = [
    (
        "RunFinished while the Agent holds the session",
        agent_phase_state,
        RunFinished(reason="finished", final_submission_id=1),
    ),
    (
        "RunFinished with another reason than the rules'",
        assessed_state,
        RunFinished(reason="agent_exited", final_submission_id=1),
    ),
    ("ValidationFailed with no Validation running", agent_phase_state, ValidationFailed(error="x")),
    ("AssessmentFailed with no Assessment running", agent_phase_state, AssessmentFailed(error="x")),
    (
        "AssessmentCompleted twice",
        assessed_state,
        AssessmentCompleted(submission_id=1, score=2.0, failures=0),
    ),
    (
        "FinalSubmissionSelected while the Agent holds the session",
        agent_phase_state,
        FinalSubmissionSelected(submission_id=1, program_digest=DA, score=1.0),
    ),
    (
        "FinalSubmissionSelected before every candidate was validated",
        validating_state,
        FinalSubmissionSelected(submission_id=2, program_digest=DB, score=1.0),
    ),
    (
        "FinishAccepted naming an unknown Submission",
        agent_phase_state,
        FinishAccepted(request_id="r", candidates=[7]),
    ),
    (
        "FinishAccepted naming a pending Submission",
        pending_state,
        FinishAccepted(request_id="r", candidates=[1]),
    ),
    ("EvaluationStarted outside the pool", agent_phase_state, evaluation_started(2, [4], 2)),
    (
        "EvaluationStarted with decreasing indices",
        agent_phase_state,
        evaluation_started(2, [2, 1], 3),
    ),
    (
        "EvaluationStarted over the episode limit",
        lambda: two_published_state(episode_pool_size=4, max_episodes_per_submission=2),
        evaluation_started(3, [0, 1, 2], 5),
    ),
    (
        "EvaluationStarted over the submission limit",
        lambda: two_published_state(max_submissions=2),
        evaluation_started(3, [2], 3, DC),
    ),
    ("EvaluationStarted after the session closed", closed_state, evaluation_started(2, [1], 2)),
    (
        "SubmissionPublished with a wrong budget_left",
        pending_state,
        SubmissionPublished(
            submission_id=1, program_digest=DA, score=0.0, failures=0, budget_used=1, budget_left=0
        ),
    ),
    (
        "RunInterrupted twice",
        lambda: fold([RunInterrupted(reason="x")], agent_phase_state()),
        RunInterrupted(reason="y"),
    ),
    ("RunResumed without RunInterrupted", agent_phase_state, RunResumed(attempt=1)),
    (
        "RunResumed skipping an attempt",
        lambda: fold([RunInterrupted(reason="x")], agent_phase_state()),
        RunResumed(attempt=5),
    ),
]


@pytest.mark.parametrize(
    ("state_of", "event"),
    [(state_of, event) for _, state_of, event in EVOLVE_REFUSES],
    ids=[name for name, _, _ in EVOLVE_REFUSES],
)
def test_evolve_refuses_events_decide_never_produces(
    state_of: Callable[[], RunState], event: Event
) -> None:
    with pytest.raises(InvalidTransition):
        evolve(state_of(), event)


EVOLVE_GAPS: list[Case] = [
    (
        "FinishAccepted naming no Submission",
        agent_phase_state,
        FinishAccepted(request_id="r", candidates=[]),
    ),
    (
        "FinishAccepted naming a Submission twice",
        agent_phase_state,
        FinishAccepted(request_id="r", candidates=[1, 1]),
    ),
    (
        "FinishAccepted over max_candidates",
        lambda: two_published_state(validation=ValidationConfig(max_candidates=1)),
        FinishAccepted(request_id="r", candidates=[1, 2]),
    ),
    (
        "FinishAccepted with budget left under require_budget_exhaustion",
        lambda: two_published_state(finish_budget_policy="require_budget_exhaustion"),
        FinishAccepted(request_id="r", candidates=[1]),
    ),
    (
        "EvaluationStarted for a duplicate submission",
        agent_phase_state,
        evaluation_started(2, [0], 2, DA),
    ),
    (
        "EvaluationStarted leaving the budget unspendable under require_budget_exhaustion",
        lambda: (
            Run(
                episode_budget=6,
                max_submissions=2,
                max_episodes_per_submission=3,
                finish_budget_policy="require_budget_exhaustion",
            ).state
        ),
        evaluation_started(1, [0], 1),
    ),
    (
        "EvaluationStarted with a parent that is not the latest program",
        agent_phase_state,
        msgspec.structs.replace(evaluation_started(2, [1], 2), parent_program_digest="sha256:zz"),
    ),
    (
        "EpisodeCompleted for an Episode that was not reserved",
        pending_state,
        EpisodeCompleted(submission_id=1, index=5, status="ok", total_reward=0.0, steps=1),
    ),
    (
        "AgentStarted after the session closed",
        lambda: fold([AgentExited(attempt=1, exit_code=0)], closed_state()),
        AgentStarted(attempt=2),
    ),
    (
        "AgentMessages before any Agent started",
        lambda: Run(episode_budget=2).state,
        AgentMessages(attempt=0, chunk=0, messages=[]),
    ),
    (
        "ValidationStarted on other candidates than the finish named",
        lambda: fold([FinishAccepted(request_id="r", candidates=[1])], two_published_state()),
        ValidationStarted(candidates=[2], split="validation", episodes=16, seed=2),
    ),
    (
        "FinalSubmissionSelected with another program digest",
        last_candidate_validated_state,
        FinalSubmissionSelected(submission_id=1, program_digest="sha256:zz", score=1.0),
    ),
    (
        "AssessmentStarted when Assessment is disabled",
        lambda: selected_state(assessment=AssessmentConfig(enabled=False)),
        AssessmentStarted(submission_id=1, split="assessment", episodes=32, seed=3),
    ),
    (
        "RunFinished naming another final Submission",
        lambda: selected_state(assessment=AssessmentConfig(enabled=False)),
        RunFinished(reason="finished", final_submission_id=7),
    ),
]


@pytest.mark.parametrize(
    ("state_of", "event"),
    [(state_of, event) for _, state_of, event in EVOLVE_GAPS],
    ids=[name for name, _, _ in EVOLVE_GAPS],
)
def test_evolve_refuses_what_only_a_forged_log_holds(
    state_of: Callable[[], RunState], event: Event
) -> None:
    """evolve() checks an event against what decide() would have produced in that state."""
    with pytest.raises(InvalidTransition):
        evolve(state_of(), event)


# --------------------------------------------------------------------------- 6. stateful


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
        config = self.config
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
            case _:
                raise AssertionError(f"unexpected command {command!r}")


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

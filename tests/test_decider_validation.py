"""Validation, selection and Assessment in the Run decider: candidates ranked by score in the
Benchmark's direction, then fewer failures, then finish order; Validation or Assessment
disabled or failed (DESIGN §4.2).

Everything here is pure: no store, no evaluation, no clocks.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evopolicygym.records.events import (
    AssessmentFailed,
    FinalSubmissionSelected,
    RunFinished,
    ValidationFailed,
)
from evopolicygym.run.config import AssessmentConfig, ValidationConfig
from evopolicygym.run.decider import (
    AgentExit,
    CompleteAssessment,
    Conclude,
    FailAssessment,
    FailValidation,
    RecordCandidate,
    Select,
    StartAssessment,
    StartValidation,
    Validate,
    next_step,
    rank_candidates,
)
from tests.support.decider import DC, DIRECTIONS, validated_run


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


def test_start_validation_is_refused_when_validation_is_disabled() -> None:
    run = validated_run(validation=ValidationConfig(enabled=False))
    run.accept(AgentExit(exit_code=0))
    assert isinstance(next_step(run.state), Validate)
    run.reject(StartValidation(), "invalid_request")
    run.accept(Select())

"""The Run's rules 2 (run.config.RULES), example by example: a repeat is a charged
Submission; candidates come only from the Agent's accepted finish unless the Run asked
the Host to nominate; Validation runs the initial Program first as the reference; the
Run records who handed off and whether the final Program improved on the initial one.

The other tests/test_decider_*.py pin rules 1 (every Run recorded before rules 2:
support.decider.make_config), and tests/test_decider_machine.py runs the state machine over
both."""

from __future__ import annotations

import pytest

from evopolicygym.records.events import (
    EvaluationStarted,
    ReferenceValidated,
    RunFinished,
    ValidationStarted,
)
from evopolicygym.run.config import RULES, RunConfig, RunConfigError, ValidationConfig
from evopolicygym.run.decider import (
    AgentExit,
    CompleteAssessment,
    Conclude,
    RecordCandidate,
    RecordReference,
    Select,
    StartAgent,
    StartAssessment,
    StartValidation,
    Submit,
    Validate,
    next_step,
)
from tests.support.decider import DA, DB, P0, Run, make_config


def rules2(**kwargs: object) -> Run:
    return Run(make_config(rules=2, **kwargs))  # type: ignore[arg-type]


def test_a_new_run_follows_rules_2_and_an_old_config_rules_1() -> None:
    assert RULES == 2 and RunConfig().resolved().rules == 2
    recorded_before = RunConfig().resolved().to_dict()
    del recorded_before["rules"], recorded_before["host_nomination"]
    old = RunConfig.from_dict(recorded_before)
    assert old.legacy and not RunConfig().resolved().legacy
    with pytest.raises(RunConfigError, match="host_nomination needs rules 2"):
        RunConfig(rules=1, host_nomination=True).resolved()


def test_a_repeat_on_the_same_indices_is_a_charged_submission() -> None:
    run = rules2(episode_budget=8)
    first = run.publish("0:2")
    again = run.submit("0:2")  # the same program on the same Episodes: matched evidence
    assert again.submission_id == first + 1 and again.budget_used == 4
    run.complete(score=2.0)
    assert run.state.budget_used == 4


def test_without_a_finish_there_are_no_candidates_and_no_final_program() -> None:
    run = rules2(episode_budget=4)
    run.accept(StartAgent())
    run.publish("0:2", score=5.0)
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Conclude()
    done = run.finished()
    assert done == RunFinished(reason="agent_exited", handoff="none")
    assert done.final_submission_id is None and done.improved is None


def test_host_nomination_is_asked_for_and_says_so() -> None:
    run = rules2(episode_budget=4, host_nomination=True)
    run.accept(StartAgent())
    low = run.publish("0:2", score=1.0)
    high = run.publish("2:4", DB, score=3.0)
    run.accept(AgentExit(exit_code=0))
    step = next_step(run.state)
    assert step == Validate(candidates=(high, low), reference=True)
    (started,) = run.accept(StartValidation())
    assert isinstance(started, ValidationStarted) and started.handoff == "host"
    run.accept(RecordReference(score=2.0, failures=0))
    run.accept(RecordCandidate(submission_id=high, score=3.0, failures=0))
    run.accept(RecordCandidate(submission_id=low, score=1.0, failures=0))
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=2.5, failures=0))
    done = run.finished()
    # A program, but the Agent handed nothing off: budget spent, handoff by the Host.
    assert (done.reason, done.handoff, done.final_submission_id) == (
        "budget_exhausted",
        "host",
        high,
    )
    assert (done.reference_score, done.improved) == (2.0, True)


def finish_and_validate(run: Run, reference: float, chosen: float) -> RunFinished:
    run.accept(StartAgent())
    first = run.publish("0:2")
    run.accept(run.finish_cmd(first))
    run.accept(AgentExit(exit_code=0))
    (started,) = run.accept(StartValidation())
    assert isinstance(started, ValidationStarted) and started.handoff == "agent"
    # The initial Program goes first: a candidate before it is refused.
    run.reject(RecordCandidate(submission_id=first, score=chosen, failures=0), "invalid_request")
    (reference_event,) = run.accept(RecordReference(score=reference, failures=1))
    assert reference_event == ReferenceValidated(program_digest=P0, score=reference, failures=1)
    run.reject(RecordReference(score=reference, failures=1), "invalid_request")  # once
    run.accept(RecordCandidate(submission_id=first, score=chosen, failures=0))
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=chosen, failures=0))
    return run.finished()


@pytest.mark.parametrize(
    ("direction", "reference", "chosen", "improved"),
    [
        ("maximize", 1.0, 2.0, True),
        ("maximize", 2.0, 1.0, False),
        ("maximize", 1.5, 1.5, False),  # a tie did not improve
        ("minimize", 2.0, 1.0, True),
        ("minimize", 1.0, 2.0, False),
    ],
)
def test_improved_is_beating_the_initial_program_on_the_same_validation_episodes(
    direction: str, reference: float, chosen: float, improved: bool
) -> None:
    run = Run(make_config(rules=2, episode_budget=4), direction=direction)
    done = finish_and_validate(run, reference, chosen)
    assert (done.reason, done.handoff, done.improved, done.reference_score) == (
        "finished",
        "agent",
        improved,
        reference,
    )


def test_without_validation_there_is_no_reference_and_improvement_is_unknown() -> None:
    run = Run(make_config(rules=2, episode_budget=4, validation=ValidationConfig(enabled=False)))
    run.accept(StartAgent())
    first = run.publish("0:2", score=4.0)
    run.accept(run.finish_cmd(first))
    run.accept(AgentExit(exit_code=0))
    assert next_step(run.state) == Validate(candidates=(first,), reference=False)
    run.reject(RecordReference(score=1.0, failures=0), "invalid_request")
    run.accept(Select())
    run.accept(StartAssessment())
    run.accept(CompleteAssessment(score=3.0, failures=0))
    done = run.finished()
    assert (done.handoff, done.improved, done.reference_score) == ("agent", None, None)


def test_rules_1_records_none_of_it() -> None:
    run = Run(make_config(episode_budget=4))  # rules 1
    run.accept(StartAgent())
    run.publish("0:2")
    run.accept(AgentExit(exit_code=0))
    (started,) = run.accept(StartValidation())  # the Host nominated, as rules 1 did
    assert isinstance(started, ValidationStarted) and started.handoff is None


def test_the_agent_may_say_which_submission_it_edited() -> None:
    run = rules2(episode_budget=8)
    first = run.publish("0:2")
    run.publish("2:4", DB)
    (started,) = run.accept(Submit(request_id="p", selector="4:6", program_digest=DA, parent=first))
    assert isinstance(started, EvaluationStarted)
    # The parent is what the Agent named (Submission 1), not the previous Submission (DB).
    assert (started.parent_submission_id, started.parent_program_digest) == (first, DA)
    run.complete()
    (from_initial,) = run.accept(
        Submit(request_id="q", selector="6:8", program_digest=DB, parent=0)
    )
    assert isinstance(from_initial, EvaluationStarted)
    assert (from_initial.parent_submission_id, from_initial.parent_program_digest) == (0, P0)
    run.complete()
    run.reject(Submit(request_id="r", selector="0", program_digest=DA, parent=9), "invalid_request")

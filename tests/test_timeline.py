"""The one wording of events (records.timeline): every event type has its text, and a
replay's timeline entry says what its event says, so the live view, the report and
`record replay` tell one event in the same words."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest

from evopolicygym.records.events import EVENT_TYPES, CandidateAssessed, EpisodeOutcome, Event
from evopolicygym.records.runs import RunSummary
from evopolicygym.records.timeline import (
    AgentEntry,
    AssessmentEntry,
    CandidateEntry,
    CreatedEntry,
    FinishedEntry,
    FinishEntry,
    HostEntry,
    ReferenceEntry,
    RejectionEntry,
    SelectionEntry,
    SubmissionEntry,
    TimelineEntry,
    ValidationEntry,
    entry_text,
    event_text,
    public_fields,
)
from evopolicygym.transcript import AgentIdentity, Message

OUTCOMES = [EpisodeOutcome(index=0, status="ok", total_reward=1.0, steps=3)] * 2

# One event of each type, its fields as a Run records them (no field left to a default
# where the text shows it).
SAMPLES: dict[str, dict[str, Any]] = {
    "RunCreated": {
        "run_id": "r",
        "config": {"episode_budget": 8, "episode_pool_size": 8},
        "benchmark_id": "cartpole",
        "benchmark_spec": {},
        "environment_digest": "sha256:0",
        "initial_program_digest": "sha256:1",
        "agent": AgentIdentity(name="reference", provider="reference"),
        "pool_blob": "sha256:2",
    },
    "AgentStarted": {"attempt": 1},
    "AgentMessages": {
        "attempt": 1,
        "chunk": 1,
        "messages": [Message(role="error", content="the API said no")],
    },
    "SubmissionRejected": {"request_id": "q", "code": "program_invalid", "message": "no"},
    "EvaluationStarted": {
        "submission_id": 1,
        "program_digest": "sha256:3",
        "indices": [0, 1],
        "budget_reserved": 2,
        "budget_used": 2,
        "parent_submission_id": 0,
    },
    "EpisodeCompleted": {
        "submission_id": 1,
        "index": 0,
        "status": "error",
        "total_reward": 0.0,
        "steps": 3,
        "failure": "ZeroDivisionError",
    },
    "SubmissionPublished": {
        "submission_id": 1,
        "program_digest": "sha256:3",
        "score": 10.0,
        "failures": 1,
        "budget_used": 2,
        "budget_left": 6,
    },
    "EvaluationFailed": {"submission_id": 1, "error": "boom", "budget_consumed": 2},
    "FinishRejected": {"request_id": "q", "code": "bad", "message": "no", "candidates": [9]},
    "FinishAccepted": {"request_id": "q", "candidates": [1, 3]},
    "AgentExited": {"attempt": 1, "exit_code": 1, "errors": 2, "last_error": "quota"},
    "ValidationStarted": {
        "candidates": [1, 3],
        "split": "validation",
        "episodes": 2,
        "seed": 5,
        "handoff": "agent",
    },
    "ReferenceValidated": {
        "program_digest": "sha256:1",
        "score": 7.0,
        "failures": 0,
        "episodes": OUTCOMES,
    },
    "CandidateValidated": {"submission_id": 3, "score": 11.0, "failures": 1, "episodes": OUTCOMES},
    "ValidationFailed": {"error": "boom"},
    "FinalSubmissionSelected": {
        "submission_id": 3,
        "program_digest": "sha256:4",
        "score": 11.0,
        "reason": "best validation score",
    },
    "AssessmentStarted": {"submission_id": 3, "split": "assessment", "episodes": 2, "seed": 6},
    "AssessmentCompleted": {"submission_id": 3, "score": 8.5, "failures": 0, "episodes": OUTCOMES},
    "AssessmentFailed": {"error": "boom"},
    "CandidateAssessed": {"submission_id": 1, "score": 6.0, "failures": 1, "episodes": OUTCOMES},
    "RunInterrupted": {"reason": "the Host was stopped"},
    "RunResumed": {"attempt": 2},
    "RunFinished": {
        "reason": "finished",
        "final_submission_id": 3,
        "validation_score": 11.0,
        "assessment_score": 8.5,
        "handoff": "agent",
        "reference_score": 7.0,
        "improved": True,
    },
    "ExperimentCreated": {
        "experiment_id": "e",
        "spec_digest": "sha256:5",
        "profile": "p",
        "config": {},
        "agents": [],
        "benchmarks": [],
        "cells": [],
    },
    "CellRunAssigned": {"cell_id": "c", "run_id": "r", "attempt": 1},
    "CellRunEnded": {
        "cell_id": "c",
        "run_id": "r",
        "attempt": 1,
        "outcome": "finished",
        "retryable": False,
    },
}


def sample(type_name: str) -> Event:
    return EVENT_TYPES[type_name](**SAMPLES[type_name])


def test_every_event_type_has_a_sample() -> None:
    assert set(SAMPLES) == set(EVENT_TYPES)


@pytest.mark.parametrize("type_name", sorted(EVENT_TYPES))
def test_every_event_type_has_one_line_of_text(type_name: str) -> None:
    text = event_text(sample(type_name))
    assert text and "\n" not in text, text


def test_host_private_values_are_not_in_the_text() -> None:
    for type_name in ("ValidationStarted", "AssessmentStarted"):
        text = event_text(sample(type_name))
        assert text is not None and str(SAMPLES[type_name]["seed"]) not in text, text


def test_a_transcript_chunk_without_an_error_has_no_text() -> None:
    chunk = EVENT_TYPES["AgentMessages"](
        attempt=1, chunk=1, messages=[Message(role="assistant", content="thinking")]
    )
    assert event_text(chunk) is None
    assert event_text(sample("AgentMessages")) == "agent error: error: the API said no"


def test_a_submission_says_its_episodes_where_the_summary_counts_them() -> None:
    summary = RunSummary(run_id="r", stream_id="run-r")
    for type_name in ("EvaluationStarted", "EpisodeCompleted", "EpisodeCompleted"):
        summary.apply(sample(type_name))
    published = sample("SubmissionPublished")
    summary.apply(published)
    assert (
        event_text(published, summary) == "submission 1  score 10  2 Episodes  published, 1 failed"
    )
    assert event_text(published) == "submission 1  score 10  published, 1 failed"


def _entries() -> list[tuple[Event, TimelineEntry]]:
    """Events and the entry a replay makes of each (fields as ``run.replay`` copies them)."""
    e = sample
    return [
        (
            e("RunCreated"),
            CreatedEntry(
                version=1, benchmark_id="cartpole", agent="reference", episode_budget=8, pool_size=8
            ),
        ),
        (e("AgentStarted"), AgentEntry(version=1, event="started", attempt=1)),
        (
            e("AgentExited"),
            AgentEntry(
                version=1, event="exited", attempt=1, exit_code=1, errors=2, last_error="quota"
            ),
        ),
        (
            e("SubmissionRejected"),
            RejectionEntry(version=1, request="submit", code="program_invalid", message="no"),
        ),
        (
            e("FinishRejected"),
            RejectionEntry(version=1, request="finish", code="bad", message="no", candidates=[9]),
        ),
        (e("FinishAccepted"), FinishEntry(version=1, candidates=[1, 3])),
        (
            e("ValidationStarted"),
            ValidationEntry(
                version=1,
                event="started",
                candidates=[1, 3],
                split="validation",
                episodes=2,
                handoff="agent",
            ),
        ),
        (e("ReferenceValidated"), ReferenceEntry(version=1, score=7.0, failures=0, episodes=2)),
        (
            e("CandidateValidated"),
            CandidateEntry(version=1, submission_id=3, score=11.0, failures=1, episodes=2),
        ),
        (e("ValidationFailed"), ValidationEntry(version=1, event="failed", error="boom")),
        (
            e("FinalSubmissionSelected"),
            SelectionEntry(version=1, submission_id=3, score=11.0, reason="best validation score"),
        ),
        (
            e("AssessmentStarted"),
            AssessmentEntry(
                version=1, event="started", submission_id=3, split="assessment", episodes=2
            ),
        ),
        (
            e("AssessmentCompleted"),
            AssessmentEntry(
                version=1, event="completed", submission_id=3, score=8.5, failures=0, episodes=2
            ),
        ),
        (e("AssessmentFailed"), AssessmentEntry(version=1, event="failed", error="boom")),
        (
            e("CandidateAssessed"),
            AssessmentEntry(
                version=1, event="candidate", submission_id=1, score=6.0, failures=1, episodes=2
            ),
        ),
        (
            CandidateAssessed(submission_id=1, error="it broke"),
            AssessmentEntry(version=1, event="candidate", submission_id=1, error="it broke"),
        ),
        (
            e("RunInterrupted"),
            HostEntry(version=1, event="interrupted", reason="the Host was stopped"),
        ),
        (e("RunResumed"), HostEntry(version=1, event="resumed", attempt=2)),
        (
            e("RunFinished"),
            FinishedEntry(
                version=1,
                reason="finished",
                final_submission_id=3,
                validation_score=11.0,
                assessment_score=8.5,
                handoff="agent",
                improved=True,
            ),
        ),
    ]


@pytest.mark.parametrize(
    ("event", "entry"), _entries(), ids=[f"{e.type_name()}" for e, _ in _entries()]
)
def test_an_entry_says_what_its_event_says(event: Event, entry: TimelineEntry) -> None:
    assert entry_text(entry) == event_text(event)


def test_every_entry_kind_has_text() -> None:
    covered = {type(entry) for _, entry in _entries()} | {SubmissionEntry}
    assert covered == set(typing.get_args(TimelineEntry))
    submission = SubmissionEntry(
        version=3,
        submission_id=1,
        selector="0:2",
        episodes=2,
        program_digest="sha256:" + "a" * 64,
        status="published",
        score=10.0,
        failures=0,
        best_so_far=True,
        parent_program_digest="sha256:" + "b" * 64,
    )
    assert entry_text(submission) == (
        "submission #1 Episodes 0:2 (2) score 10 failures 0 best-so-far (from sha256:bbbbbbbbbbbb…)"
    )


def test_record_events_fields_hide_host_private_values() -> None:
    data = msgspec.to_builtins(sample("ValidationStarted"))
    assert dict(public_fields("ValidationStarted", data)) == {
        "candidates": [1, 3],
        "episodes": 2,
        "handoff": "agent",
        "split": "validation",
    }
    created = msgspec.to_builtins(
        EVENT_TYPES["RunCreated"](**{**SAMPLES["RunCreated"], "seeds": {"validation": 5}})
    )
    fields = dict(public_fields("RunCreated", created))
    assert fields["pool"] == 8 and "seeds" not in fields and "pool_blob" not in fields
    chunk = msgspec.to_builtins(sample("AgentMessages"))
    assert dict(public_fields("AgentMessages", chunk))["messages"] == 1

"""Events as text: one wording per event type, for every reader that tells people what a Run
did: `run`'s live view, `record replay`, `record events` and the report.

``event_text`` says one event in one line of public facts. ``record replay`` shows a Run as
``TimelineEntry`` values (its fold, ``run.replay``, joins a Submission's start and outcome
into one entry); ``entry_text`` says each in the same words as the event it stands for.
``public_fields`` is what ``record events`` lists of a raw payload, the Host-private fields
left out. Nothing here scrubs recorded free text (errors, reasons): the callers that show a
Run to others scrub it with the Run's ``PrivateValues``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentFailed,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    CellRunAssigned,
    CellRunEnded,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    ExperimentCreated,
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
)
from evopolicygym.records.pools import recorded_pool_size
from evopolicygym.records.runs import PRIVATE_KEYS, RunSummary
from evopolicygym.transcript import fault_line

__all__ = [
    "AgentEntry",
    "AssessmentEntry",
    "CandidateEntry",
    "CreatedEntry",
    "FinishEntry",
    "FinishedEntry",
    "HostEntry",
    "ReferenceEntry",
    "RejectionEntry",
    "SelectionEntry",
    "SubmissionEntry",
    "TimelineEntry",
    "ValidationEntry",
    "entry_text",
    "event_text",
    "public_fields",
]


# --------------------------------------------------------------------------- timeline entries


class _Entry(msgspec.Struct, kw_only=True, tag_field="kind"):
    version: int  # the stream version of the event the entry starts at


class CreatedEntry(_Entry, tag="created"):
    benchmark_id: str
    agent: str
    episode_budget: int | None
    pool_size: int


class SubmissionEntry(_Entry, tag="submission"):
    submission_id: int
    selector: str
    episodes: int
    program_digest: str
    status: Literal["evaluating", "published", "failed"] = "evaluating"
    score: float | None = None
    failures: int | None = None
    best_so_far: bool = False  # strictly better than every earlier published Submission
    # single, matched (every Submission so far on the same indices) or unmatched: whether
    # best_so_far compares like with like
    best_so_far_basis: str | None = None
    parent_program_digest: str | None = None  # the program the edit started from
    error: str | None = None
    completed_version: int | None = None


class RejectionEntry(_Entry, tag="rejection"):
    request: Literal["submit", "finish"]
    code: str
    message: str
    selector: str | None = None
    candidates: list[int] = []


class AgentEntry(_Entry, tag="agent"):
    event: Literal["started", "exited"]
    attempt: int
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    errors: int = 0  # error records of the attempt (API errors, a failed login)
    last_error: str | None = None


class FinishEntry(_Entry, tag="finish"):
    candidates: list[int]


class ValidationEntry(_Entry, tag="validation"):
    event: Literal["started", "failed"]
    candidates: list[int] = []
    split: str | None = None
    episodes: int | None = None
    error: str | None = None
    handoff: str | None = None  # who named the candidates (agent or host)


class ReferenceEntry(_Entry, tag="reference"):
    """The initial Program on the Validation Episodes: what the final one must beat."""

    score: float
    failures: int
    episodes: int


class CandidateEntry(_Entry, tag="candidate"):
    submission_id: int
    score: float
    failures: int
    episodes: int


class SelectionEntry(_Entry, tag="selection"):
    submission_id: int
    score: float
    reason: str


class AssessmentEntry(_Entry, tag="assessment"):
    event: Literal["started", "completed", "failed", "candidate"]  # candidate: CandidateAssessed
    submission_id: int | None = None
    split: str | None = None
    episodes: int | None = None
    score: float | None = None
    failures: int | None = None
    error: str | None = None


class HostEntry(_Entry, tag="host"):
    event: Literal["interrupted", "resumed"]
    reason: str = ""
    attempt: int | None = None


class FinishedEntry(_Entry, tag="finished"):
    reason: str
    final_submission_id: int | None = None
    validation_score: float | None = None
    assessment_score: float | None = None
    handoff: str | None = None
    improved: bool | None = None


TimelineEntry: TypeAlias = (
    CreatedEntry
    | SubmissionEntry
    | RejectionEntry
    | AgentEntry
    | FinishEntry
    | ValidationEntry
    | ReferenceEntry
    | CandidateEntry
    | SelectionEntry
    | AssessmentEntry
    | HostEntry
    | FinishedEntry
)


# --------------------------------------------------------------------------- the words
# One function per thing said, shared by ``event_text`` and ``entry_text``.


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _num(value: float | int | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids))


def _episodes(count: int) -> str:
    return f"{count} Episode{'' if count == 1 else 's'}"


def _failed(failures: int | None) -> str:
    return f", {failures} failed" if failures else ""


def _created(benchmark_id: str, agent: str, budget: Any, pool_size: int | None) -> str:
    return (
        f"run created: {benchmark_id}, agent {agent}, budget {_num(budget)}, "
        f"pool of {_num(pool_size)}"
    )


def _started(attempt: int) -> str:
    return f"agent started (attempt {attempt})"


def _exited(
    reason: str, exit_code: int | None, signal: int | None, errors: int, last_error: str | None
) -> str:
    how = [_one_line(reason) or "exited"]
    if exit_code is not None:
        how.append(f"code {exit_code}")
    if signal is not None:
        how.append(f"signal {signal}")
    line = f"agent exited ({', '.join(how)})"
    if errors:
        last = f", last: {_one_line(last_error)}" if last_error else ""
        line += f"; {errors} agent error{'' if errors == 1 else 's'}{last}"
    return line


def _rejected(request: str, code: str, message: str, what: str) -> str:
    return f"{request} rejected: {code}: {_one_line(message)}" + (f" ({what})" if what else "")


def _submission(submission_id: int, episodes: int | None, *details: str) -> str:
    """``submission 3  score 73  1 Episode  published`` (two spaces between the parts)."""
    parts = [f"submission {submission_id}", *details[:-1]]
    if episodes is not None:
        parts.append(_episodes(episodes))
    return "  ".join([*parts, details[-1]])


def _validating(candidates: list[int], episodes: int | None, handoff: str | None) -> str:
    by = f", named by the {handoff}" if handoff else ""
    return f"validation: submissions {_ids(candidates)} on {_episodes(episodes or 0)} each{by}"


def _reference(score: float, failures: int) -> str:
    return f"validation: initial program scores {score:g}{_failed(failures)} (the reference)"


def _validated(submission_id: int, score: float, failures: int) -> str:
    return f"validation: submission {submission_id} scores {score:g}{_failed(failures)}"


def _selected(submission_id: int, score: float, reason: str) -> str:
    why = f": {_one_line(reason)}" if reason else ""
    return f"selected submission {submission_id} (validation {score:g}){why}"


def _assessing(submission_id: int | None, episodes: int | None) -> str:
    return f"assessment: submission {_num(submission_id)} on {_episodes(episodes or 0)}"


def _assessed(submission_id: int | None, score: float | None, episodes: int) -> str:
    scores = f"scores {_num(score)} on {_episodes(episodes)}"
    return f"assessment: submission {_num(submission_id)} {scores}"


def _candidate_assessed(
    submission_id: int | None, score: float | None, episodes: int, error: str | None
) -> str:
    """Another validated candidate on the Assessment Episodes (``assessment.candidates``)."""
    if error is not None:
        return f"candidate #{_num(submission_id)} not assessed: {_one_line(error)}"
    return (
        f"candidate #{_num(submission_id)} assessed: score {_num(score)} on {_episodes(episodes)}"
    )


def _failure(what: str, error: str | None) -> str:
    return f"{what} failed: {_one_line(error or '')}"


def _finished(
    reason: str,
    final: int | None,
    validation: float | None,
    assessment: float | None,
    handoff: str | None,
    improved: bool | None,
) -> str:
    facts = [f"final submission {final}"] if final is not None else []
    if validation is not None:
        facts.append(f"validation {validation:g}")
    if assessment is not None:
        facts.append(f"assessment {assessment:g}")
    if handoff is not None:
        facts.append(f"handoff {handoff}")
    if improved is not None:
        facts.append(f"improved {'yes' if improved else 'no'}")
    return f"run finished: {reason}" + (f" ({', '.join(facts)})" if facts else "")


# --------------------------------------------------------------------------- events


def event_text(event: Event, summary: RunSummary | None = None) -> str | None:
    """One event in one line of public facts (an Agent's errors: a line each); None only for
    a transcript chunk holding no error. ``summary``, the Run's summary folded up to and
    including ``event``, adds what the event does not carry (a Submission's Episode count,
    who named the candidates)."""
    match event:
        case AgentMessages():
            faults = [fault_line(m) for m in event.messages if m.role == "error"]
            return "\n".join(f"agent error: {fault}" for fault in faults) or None
        case EvaluationStarted() | EpisodeCompleted() | SubmissionPublished() | EvaluationFailed():
            return _submission_text(event, summary)
        case ValidationStarted() | ReferenceValidated() | CandidateValidated() | ValidationFailed():
            return _validation_text(event, summary)
        case AssessmentStarted() | AssessmentCompleted() | AssessmentFailed() | CandidateAssessed():
            return _assessment_text(event)
        case ExperimentCreated() | CellRunAssigned() | CellRunEnded():
            return _experiment_text(event)
    return _run_text(event, summary)


def _run_text(event: Event, summary: RunSummary | None) -> str:
    """The Run's and the Agent's own events."""
    match event:
        case RunCreated():
            budget = event.config.get("episode_budget")
            return _created(event.benchmark_id, event.agent.name, budget, recorded_pool_size(event))
        case AgentStarted():
            return _started(event.attempt)
        case AgentExited():
            return _exited(
                event.reason, event.exit_code, event.signal, event.errors, event.last_error
            )
        case SubmissionRejected():
            selector = "" if event.selector is None else f"selector {event.selector!r}"
            return _rejected("submit", event.code, event.message, selector)
        case FinishRejected():
            candidates = f"candidates {_ids(event.candidates)}" if event.candidates else ""
            return _rejected("finish", event.code, event.message, candidates)
        case FinishAccepted():
            return f"finish accepted: candidates {_ids(event.candidates)}"
        case FinalSubmissionSelected():
            return _selected(event.submission_id, event.score, event.reason)
        case RunInterrupted():
            return f"run interrupted: {_one_line(event.reason)}"
        case RunResumed():
            return f"run resumed (attempt {event.attempt})"
        case RunFinished():
            handoff = summary.handoff if summary is not None else event.handoff
            improved = summary.improved if summary is not None else event.improved
            return _finished(
                event.reason,
                event.final_submission_id,
                event.validation_score,
                event.assessment_score,
                handoff,
                improved,
            )
    raise TypeError(f"no text for event type {event.type_name()}")


def _submission_text(
    event: EvaluationStarted | EpisodeCompleted | SubmissionPublished | EvaluationFailed,
    summary: RunSummary | None,
) -> str:
    found = summary.submissions.get(event.submission_id) if summary is not None else None
    episodes = found.episodes if found is not None else None
    match event:
        case EvaluationStarted():
            named = event.parent_submission_id
            parent = (
                ""
                if named is None
                else " from the initial program"
                if named == 0
                else f" from submission {named}"
            )
            status = f"evaluating{parent}, budget used {event.budget_used}"
            return _submission(event.submission_id, len(event.indices), status)
        case EpisodeCompleted():
            why = f": {_one_line(event.failure)}" if event.failure else ""
            return (
                f"submission {event.submission_id}  Episode {event.index} {event.status}, "
                f"return {event.total_reward:g} in {event.steps} steps{why}"
            )
        case SubmissionPublished():
            status = "published" + _failed(event.failures)
            return _submission(event.submission_id, episodes, f"score {event.score:g}", status)
        case EvaluationFailed():
            line = _submission(event.submission_id, episodes, "evaluation failed")
            return f"{line}: {_one_line(event.error)}"


def _validation_text(
    event: ValidationStarted | ReferenceValidated | CandidateValidated | ValidationFailed,
    summary: RunSummary | None,
) -> str:
    match event:
        case ValidationStarted():
            handoff = summary.candidates_by if summary is not None else event.handoff
            return _validating(event.candidates, event.episodes, handoff)
        case ReferenceValidated():
            return _reference(event.score, event.failures)
        case CandidateValidated():
            return _validated(event.submission_id, event.score, event.failures)
        case ValidationFailed():
            return _failure("validation", event.error)


def _assessment_text(
    event: AssessmentStarted | AssessmentCompleted | AssessmentFailed | CandidateAssessed,
) -> str:
    match event:
        case AssessmentStarted():
            return _assessing(event.submission_id, event.episodes)
        case AssessmentCompleted():
            line = _assessed(event.submission_id, event.score, len(event.episodes))
            return line + _failed(event.failures)
        case AssessmentFailed():
            return _failure("assessment", event.error)
        case CandidateAssessed():
            error = None if event.score is not None else event.error or "its Assessment failed"
            line = _candidate_assessed(event.submission_id, event.score, len(event.episodes), error)
            return line + ("" if error else _failed(event.failures))


def _experiment_text(event: ExperimentCreated | CellRunAssigned | CellRunEnded) -> str:
    match event:
        case ExperimentCreated():
            return (
                f"experiment {event.experiment_id} created: {len(event.cells)} cells "
                f"({len(event.agents)} agents, {len(event.benchmarks)} Benchmarks)"
            )
        case CellRunAssigned():
            return f"cell {event.cell_id}: run {event.run_id} (attempt {event.attempt})"
        case CellRunEnded():
            error = f": {_one_line(event.error)}" if event.error else ""
            return f"cell {event.cell_id}: run {event.run_id} ended {event.outcome}{error}"


# --------------------------------------------------------------------------- timeline entries


def entry_text(entry: TimelineEntry) -> str:
    """A timeline entry in the words of the event it stands for; a Submission's entry joins
    its start and its outcome, so it says both, with its Episodes and parent program."""
    match entry:
        case CreatedEntry():
            return _created(entry.benchmark_id, entry.agent, entry.episode_budget, entry.pool_size)
        case SubmissionEntry():
            return _submission_row(entry)
        case RejectionEntry() if entry.request == "submit":
            selector = "" if entry.selector is None else f"selector {entry.selector!r}"
            return _rejected("submit", entry.code, entry.message, selector)
        case RejectionEntry():
            candidates = f"candidates {_ids(entry.candidates)}" if entry.candidates else ""
            return _rejected("finish", entry.code, entry.message, candidates)
        case AgentEntry() if entry.event == "started":
            return _started(entry.attempt)
        case AgentEntry():
            return _exited(
                entry.reason, entry.exit_code, entry.signal, entry.errors, entry.last_error
            )
        case FinishEntry():
            return f"finish accepted: candidates {_ids(entry.candidates)}"
        case ValidationEntry() if entry.event == "started":
            return _validating(entry.candidates, entry.episodes, entry.handoff)
        case ValidationEntry():
            return _failure("validation", entry.error)
        case ReferenceEntry():
            return _reference(entry.score, entry.failures)
        case CandidateEntry():
            return _validated(entry.submission_id, entry.score, entry.failures)
        case SelectionEntry():
            return _selected(entry.submission_id, entry.score, entry.reason)
        case AssessmentEntry():
            return _assessment_row(entry)
        case HostEntry() if entry.event == "interrupted":
            return f"run interrupted: {_one_line(entry.reason)}"
        case HostEntry():
            return f"run resumed (attempt {_num(entry.attempt)})"
        case FinishedEntry():
            return _finished(
                entry.reason,
                entry.final_submission_id,
                entry.validation_score,
                entry.assessment_score,
                entry.handoff,
                entry.improved,
            )


def _short(digest: str | None) -> str:
    if digest is None:
        return "-"
    return digest[:19] + "…" if digest.startswith("sha256:") and len(digest) > 19 else digest


def _submission_row(entry: SubmissionEntry) -> str:
    """``submission #1 Episodes 0:2 (2) score 10 failures 0 best-so-far (from sha256:…)``."""
    detail = f"submission #{entry.submission_id} Episodes {entry.selector} ({entry.episodes}) "
    if entry.status == "published":
        detail += f"score {_num(entry.score)} failures {_num(entry.failures)}"
        if entry.best_so_far:
            unmatched = " (unmatched evidence)" if entry.best_so_far_basis == "unmatched" else ""
            detail += " best-so-far" + unmatched
    elif entry.status == "failed":
        detail += f"FAILED: {_one_line(entry.error or '')}"
    else:
        detail += "evaluating"
    return f"{detail} (from {_short(entry.parent_program_digest)})"


def _assessment_row(entry: AssessmentEntry) -> str:
    match entry.event:
        case "started":
            return _assessing(entry.submission_id, entry.episodes)
        case "completed":
            line = _assessed(entry.submission_id, entry.score, entry.episodes or 0)
            return line + _failed(entry.failures)
        case "candidate":
            error = None if entry.score is not None else entry.error or "its Assessment failed"
            line = _candidate_assessed(entry.submission_id, entry.score, entry.episodes or 0, error)
            return line + ("" if error else _failed(entry.failures))
    return _failure("assessment", entry.error)


# --------------------------------------------------------------------------- raw payloads


def public_fields(type_name: str, data: dict[str, Any]) -> list[tuple[str, Any]]:
    """A raw payload's public fields as ``record events`` lists them, by name: the Episode
    pool as its size (``pool``), a transcript chunk as its count of ``messages``, and no
    Host-private field (seeds, the pool itself) nor one that is null."""
    fields: list[tuple[str, Any]] = []
    config = data.get("config")
    if isinstance(data.get("pool_blob"), str) and isinstance(config, dict):  # the pool is a blob
        fields.append(("pool", config.get("episode_pool_size")))
    elif isinstance(data.get("pool"), list):  # inline, as Runs recorded before hold it
        fields.append(("pool", len(data["pool"])))
    for key in sorted(data):
        if key in PRIVATE_KEYS or data[key] is None:
            continue
        if type_name == "AgentMessages" and key == "messages":
            fields.append(("messages", len(data[key])))
            continue
        fields.append((key, data[key]))
    return fields

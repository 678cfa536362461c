"""What the report shows of one Run, read in one pass over its stream.

``read_run`` folds the ``RunSummary`` (the Run read API) and keeps beside it what a summary
leaves out and a page shows: the timeline, each Submission's Episodes, the transcript of
each Agent attempt, and the public outcomes of Validation and Assessment. Nothing
Host-private is kept: no pool, no seeds, no EpisodeSpecs (events that carry them are
read for their public fields only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    ArtifactRef,
    AssessmentCompleted,
    AssessmentStarted,
    CandidateAssessed,
    CandidateValidated,
    EpisodeCompleted,
    EpisodeOutcome,
    Event,
    EventCodecError,
    FinishRejected,
    ReferenceValidated,
    RunCreated,
    SubmissionPublished,
    SubmissionRejected,
    ValidationStarted,
)
from evopolicygym.records.location import Store
from evopolicygym.records.private import PrivateValues
from evopolicygym.records.runs import RunSummary, run_id_of
from evopolicygym.records.timeline import event_text
from evopolicygym.report.html import plain
from evopolicygym.report.videos import is_video
from evopolicygym.transcript import Message

if TYPE_CHECKING:  # pandas is loaded where a page needs it, not on import
    pass

__all__ = [
    "Lineage",
    "OutcomeHolder",
    "Outcomes",
    "RunData",
    "TimelineEvent",
    "fold_outcomes",
    "lineage_of",
    "read_run",
]


@dataclass(frozen=True)
class TimelineEvent:
    at: int  # ns since the epoch, as recorded
    kind: str  # the event type
    text: str  # what happened, public facts only


@dataclass
class Outcomes:
    """A Validation or Assessment result: its score and the Episodes' public outcomes."""

    score: float
    failures: int
    episodes: list[EpisodeOutcome]


@dataclass(frozen=True)
class Lineage:
    """A Submission against its parent and the best before it, as ``submissions_df`` tells
    it (the ``programs`` export's rules)."""

    parent_submission_id: int | None  # 0: the initial program
    parent_basis: str | None  # stated (the Agent named it) or nearest (the smallest diff)
    edit_kind: str | None
    beats_parent: bool | None  # on the indices it shares with its parent
    best_so_far_score: float | None  # the best published score up to it (None: not published)
    best_so_far_basis: str | None  # first, matched or unmatched


@dataclass
class RunData:
    summary: RunSummary
    timeline: list[TimelineEvent] = field(default_factory=list)
    episodes: dict[int, list[EpisodeCompleted]] = field(default_factory=dict)  # by Submission
    transcripts: dict[int, list[Message]] = field(default_factory=dict)  # by Agent attempt
    tools: dict[int, list[str]] = field(default_factory=dict)  # tool names offered, by attempt
    exits: dict[int, AgentExited] = field(default_factory=dict)
    rejections: list[SubmissionRejected | FinishRejected] = field(default_factory=list)
    validation: dict[int, Outcomes] = field(default_factory=dict)  # by Submission
    reference: Outcomes | None = None  # the initial Program on the Validation Episodes
    validation_split: str | None = None
    validation_episodes: int | None = None
    assessment: Outcomes | None = None
    assessment_split: str | None = None
    # The other candidates on the same Assessment Episodes (``assessment.candidates``), by
    # Submission; None where that one's Assessment failed.
    candidate_assessments: dict[int, Outcomes | None] = field(default_factory=dict)
    undecodable: int = 0
    # The Run's seeds and scenarios, scrubbed from every recorded text the page shows (an
    # error message can quote one).
    private: PrivateValues = field(default_factory=PrivateValues)
    lineage: dict[int, Lineage] = field(default_factory=dict)  # by Submission
    videos: dict[int, list[ArtifactRef]] = field(default_factory=dict)  # by Submission


class OutcomeHolder(Protocol):
    """Where the public outcomes of Validation and Assessment are kept (``RunData`` and the
    viewer's Run reader)."""

    validation_split: str | None
    validation_episodes: int | None
    reference: Outcomes | None
    validation: dict[int, Outcomes]
    assessment_split: str | None
    assessment: Outcomes | None
    candidate_assessments: dict[int, Outcomes | None]


def fold_outcomes(target: OutcomeHolder, event: Event) -> bool:
    """Keep ``event``'s public outcome in ``target`` if it is one of Validation or Assessment
    (no seed, no EpisodeSpec); whether it was."""
    match event:
        case ValidationStarted():
            target.validation_split, target.validation_episodes = event.split, event.episodes
        case ReferenceValidated():
            target.reference = Outcomes(event.score, event.failures, list(event.episodes))
        case CandidateValidated():
            target.validation[event.submission_id] = Outcomes(
                event.score, event.failures, list(event.episodes)
            )
        case AssessmentStarted():
            target.assessment_split = event.split
        case AssessmentCompleted():
            target.assessment = Outcomes(event.score, event.failures, list(event.episodes))
        case CandidateAssessed():
            target.candidate_assessments[event.submission_id] = (
                None
                if event.score is None
                else Outcomes(event.score, event.failures, list(event.episodes))
            )
        case _:
            return False
    return True


def read_run(store: Store, stream_id: str) -> RunData:
    """The Run of ``stream_id`` (see ``records.runs.resolve_run``), read in full."""
    data = RunData(RunSummary(run_id=run_id_of(stream_id) or stream_id, stream_id=stream_id))
    summary = data.summary
    recorded: dict[int, list[Message]] = {}
    for envelope in store.events.read_stream(stream_id, 0):
        try:
            event = envelope.event()
        except EventCodecError:
            data.undecodable += 1
            summary.events = max(summary.events, envelope.stream_version)
            continue
        summary.apply(event, version=envelope.stream_version, at=envelope.recorded_at)
        match event:
            case RunCreated():
                data.private = PrivateValues.of(event, store.blobs)
            case AgentMessages() if event.source is not None:
                # The attempt as the CLI's own record holds it: taken instead of the chunks
                # (as the exporters do), the live stream's system prompt kept ahead of it.
                recorded[event.attempt] = list(event.messages)
                continue
            case AgentMessages():
                data.transcripts.setdefault(event.attempt, []).extend(event.messages)
                continue
            case AgentStarted():
                data.transcripts.setdefault(event.attempt, [])
                if event.tools:
                    data.tools[event.attempt] = [
                        str(tool.get("function", {}).get("name", "?")) for tool in event.tools
                    ]
            case AgentExited():
                data.exits[event.attempt] = event
            case SubmissionPublished():
                shown = [a for a in event.artifacts if is_video(a)]
                if shown:
                    data.videos[event.submission_id] = shown
            case SubmissionRejected() | FinishRejected():
                data.rejections.append(event)
            case EpisodeCompleted():
                data.episodes.setdefault(event.submission_id, []).append(event)
                continue  # one timeline row per Submission's evaluation, not per Episode
            case _:
                fold_outcomes(data, event)
        text = event_text(event, summary)
        if text is not None:
            data.timeline.append(TimelineEvent(envelope.recorded_at, event.type_name(), text))
    for attempt, messages in recorded.items():
        live = data.transcripts.get(attempt, [])
        data.transcripts[attempt] = (
            live[:1] + messages if live and live[0].role == "system" else messages
        )
    return data


def lineage_of(store: Store, run_id: str) -> dict[int, Lineage]:
    """Each Submission's parent, edit kind and best so far, from the analysis frames; none
    where a program cannot be read (the page then shows no diffs and no best so far)."""
    from evopolicygym.analysis import submissions_df

    try:
        frame = submissions_df(store, run_ids=[run_id])
    except BlobError:  # a program blob is missing or corrupt (`record verify` says which)
        return {}
    found: dict[int, Lineage] = {}
    for row in frame.to_dict("records"):
        found[int(row["submission_id"])] = Lineage(
            parent_submission_id=plain(row["parent_submission_id"]),
            parent_basis=plain(row["parent_basis"]),
            edit_kind=plain(row["edit_kind"]),
            beats_parent=plain(row["beats_parent"]),
            best_so_far_score=plain(row["best_so_far_score"]),
            best_so_far_basis=plain(row["best_so_far_basis"]),
        )
    return found

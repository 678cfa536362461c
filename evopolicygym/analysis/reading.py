"""Reading Runs for the dataframes: which Runs, each read once from its stream.

``selected_runs`` opens the store (a ``Store``, a path, or None for the default store)
and names the Run streams asked for: every Run, the ``run_ids`` given, or an
experiment's Runs (``experiment="<id>"``, with each Run's cell). ``read_run`` folds one
Run's stream with the Run read API (``RunSummary.apply``) and keeps beside the summary
what the frames need and a summary leaves out: each Submission's Episodes, the
transcript by Agent attempt (only when asked: it is the bulk of a long Run), and the
Run's private values to scrub from recorded text. ``lineage`` gives each Submission its
parent, edit kind and matched comparison with the parent, by the rules the ``programs``
export uses.

Nothing Host-private leaves here: the pool and every seed stay in ``RunCreated``, which
is used only to scrub text; Validation and Assessment are scores (the summary's),
never their Episodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from evopolicygym.lineage import LineageInput
from evopolicygym.lineage import lineage as lineage_of
from evopolicygym.program import Program
from evopolicygym.program_edits import Lines, edit_kind, file_lines
from evopolicygym.records.events import (
    AgentMessages,
    AgentStarted,
    EpisodeCompleted,
    EvaluationStarted,
    Event,
    EventCodecError,
    RunCreated,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.private import PrivateValues
from evopolicygym.records.runs import (
    RUN_PREFIX,
    RunSummary,
    SubmissionSummary,
    resolve_run,
    run_id_of,
)
from evopolicygym.records.store import BlobStore
from evopolicygym.transcript import Message

__all__ = [
    "Cell",
    "RunRecord",
    "StoreLike",
    "SubmissionLineage",
    "lineage",
    "programs_of",
    "read_run",
    "selected_runs",
]

StoreLike = Store | str | os.PathLike[str] | None


@dataclass(frozen=True)
class Cell:
    """A Run's place in an experiment (``records.experiments.CellRun``, as the frames use it)."""

    experiment_id: str
    cell_id: str
    agent: str
    benchmark: str
    seed: int
    agent_seed: int
    attempt: int
    current: bool
    outcome: str | None


@dataclass
class RunRecord:
    """One Run as the frames read it: its summary and what a summary does not keep."""

    summary: RunSummary
    created: RunCreated | None
    blobs: BlobStore | None = None
    episodes: dict[int, list[EpisodeCompleted]] = field(default_factory=dict)  # by Submission
    episode_times: dict[int, list[int]] = field(default_factory=dict)  # recorded_at, alongside
    transcripts: dict[int, list[Message]] = field(default_factory=dict)  # by Agent attempt
    cell: Cell | None = None

    _private: PrivateValues | None = field(default=None, repr=False)

    @property
    def private(self) -> PrivateValues:
        """The Run's private values, to scrub recorded text with; read (the pool blob
        included) only when some text needs it."""
        if self._private is None:
            self._private = PrivateValues()
            if self.created is not None:
                self._private.add_created(self.created, self.blobs)
        return self._private

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def direction(self) -> str:
        return self.summary.score_direction

    @property
    def started(self) -> list[SubmissionSummary]:
        """Submissions whose evaluation started (an EvaluationStarted names their Program),
        in id order."""
        return [
            s
            for _, s in sorted(self.summary.submissions.items())
            if s.budget_reserved is not None and s.program_digest is not None
        ]

    @property
    def failure_score(self) -> float | None:
        spec = self.summary.benchmark_spec or {}
        floor = spec.get("failure_score")
        return (
            float(floor) if isinstance(floor, int | float) and not isinstance(floor, bool) else None
        )


# --------------------------------------------------------------------------- which Runs


@contextmanager
def _opened(store: StoreLike) -> Iterator[Store]:
    if isinstance(store, Store):
        yield store
        return
    with open_store(store) as opened:
        yield opened


def _cells(store: Store, experiment: str) -> dict[str, Cell]:
    # Imported here: the experiment read API is only needed with experiment=.
    from evopolicygym.records.experiments import experiment_runs

    return {
        run.run_id: Cell(
            experiment_id=run.experiment_id,
            cell_id=run.cell_id,
            agent=run.agent,
            benchmark=run.benchmark,
            seed=run.seed,
            agent_seed=run.agent_seed,
            attempt=run.attempt,
            current=run.current,
            outcome=run.outcome,
        )
        for run in experiment_runs(store.events, experiment)
    }


@contextmanager
def selected_runs(
    store: StoreLike, run_ids: Sequence[str] | None = None, experiment: str | None = None
) -> Iterator[tuple[Store, list[tuple[str, Cell | None]]]]:
    """The open store and the Run streams asked for (stream id, experiment cell), in
    stream order, or the experiment's matrix order. ``UnknownRun`` / ``UnknownExperiment``
    name what is not in the store."""
    if isinstance(run_ids, str):
        run_ids = [run_ids]  # one id given bare is one Run, not its characters
    with _opened(store) as opened:
        if experiment is not None:
            cells = _cells(opened, experiment)
            wanted = (
                None
                if run_ids is None
                else {run_id_of(resolve_run(opened.events, r)) for r in run_ids}
            )
            streams = [
                (RUN_PREFIX + run_id, cell)
                for run_id, cell in cells.items()
                if wanted is None or run_id in wanted
            ]
            # A cell's Run is assigned before it is created: one not recorded yet is left out.
            known = {info.stream_id for info in opened.events.streams(RUN_PREFIX)}
            yield opened, [(s, c) for s, c in streams if s in known]
        elif run_ids is not None:
            yield opened, [(resolve_run(opened.events, r), None) for r in dict.fromkeys(run_ids)]
        else:
            yield opened, [(info.stream_id, None) for info in opened.events.streams(RUN_PREFIX)]


# --------------------------------------------------------------------------- one Run


def read_run(
    store: Store, stream_id: str, cell: Cell | None = None, *, messages: bool = False
) -> RunRecord:
    """The Run ``stream_id`` read in one pass; its transcript only with ``messages``. A
    payload that does not decode is left out (the summary's ``undecodable`` lists it)."""
    summary = RunSummary(run_id=run_id_of(stream_id) or stream_id, stream_id=stream_id)
    record = RunRecord(summary=summary, created=None, blobs=store.blobs, cell=cell)
    live: dict[int, list[Message]] = {}
    recorded: dict[int, list[Message]] = {}
    started: set[int] = set()
    agent_messages = AgentMessages.type_name()
    for envelope in store.events.read_stream(stream_id, 0):
        if envelope.type == agent_messages and not messages:
            summary.fold([envelope])  # counts it without decoding the chunk
            continue
        try:
            event: Event = envelope.event()
        except EventCodecError:
            summary.undecodable.append(envelope.position)
            continue
        summary.apply(event, version=envelope.stream_version, at=envelope.recorded_at)
        match event:
            case RunCreated():
                record.created = event
            case AgentStarted():
                live.setdefault(event.attempt, [])
            case AgentMessages() if event.source is not None:
                # The attempt as the CLI's own session record holds it, as the exports take it.
                recorded[event.attempt] = list(event.messages)
            case AgentMessages():
                live.setdefault(event.attempt, []).extend(event.messages)
            case EvaluationStarted():
                started.add(event.submission_id)
            # Episodes of a Submission never started are ignored, as the workspace does.
            case EpisodeCompleted() if event.submission_id in started:
                record.episodes.setdefault(event.submission_id, []).append(event)
                record.episode_times.setdefault(event.submission_id, []).append(
                    envelope.recorded_at
                )
    for number, found in recorded.items():
        # The CLI's own record replaces the live chunks, as in the exports; the error
        # records only the live stream has (API errors) follow it.
        chunks = live.get(number, [])
        kept = [m for m in found if m.role != "error"]
        errors = [m for m in chunks if m.role == "error"]
        live[number] = (chunks[:1] if chunks and chunks[0].role == "system" else []) + kept + errors
    record.transcripts = {number: live[number] for number in sorted(live)}
    return record


# --------------------------------------------------------------------------- lineage


@dataclass(frozen=True)
class SubmissionLineage:
    """A Submission against its parent and the Submissions before it (``programs`` rules)."""

    parent_submission_id: int  # 0: the initial program
    parent_basis: str  # stated (the Agent named it) or nearest (the smallest diff)
    parent_distance: int  # lines changed from the parent
    edit_kind: str  # none, cosmetic, parametric or synthesis
    matched_indices: list[int]
    matched_score: float | None
    parent_matched_score: float | None
    beats_parent: bool | None  # on matched_indices, in the Benchmark's direction
    best_so_far: bool  # published, and better than every earlier published score
    best_so_far_score: float | None  # the best published score up to and including it
    best_so_far_basis: str | None  # first | matched | unmatched (None: not published)
    best_so_far_matched: bool | None  # beats every earlier one it shares indices with, there


class _Programs:
    """Programs and their lines by digest, read from the blobs once per frame build."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.programs: dict[str, Program] = {}
        self.lines: dict[str, Lines] = {}
        self.kinds: dict[tuple[str, str], str] = {}

    def program(self, digest: str) -> Program:
        found = self.programs.get(digest)
        if found is None:
            found = self.programs[digest] = self.store.blobs.get_program(digest)
        return found

    def edit_kind(self, before: str, after: str) -> str:
        """``edit_kind`` of two Programs by digest, once per pair: Runs of a study share
        their initial program and often their edits, and the syntax trees cost the most."""
        key = (before, after)
        found = self.kinds.get(key)
        if found is None:
            found = self.kinds[key] = edit_kind(self.program(before), self.program(after))
        return found

    def lines_of(self, digest: str) -> Lines:
        found = self.lines.get(digest)
        if found is None:
            found = self.lines[digest] = file_lines(self.program(digest))
        return found


def lineage(record: RunRecord, programs: _Programs) -> dict[int, SubmissionLineage]:
    """Each started Submission's parent, edit kind and matched comparisons, by id."""
    initial = record.summary.initial_program_digest
    if initial is None:
        return {}
    inputs = [
        LineageInput(
            submission_id=s.submission_id,
            program_digest=s.program_digest,
            indices=s.indices,
            published=s.status == "published",
            score=s.score,
            stated_parent=s.parent_submission_id,
            episodes=[
                (e.index, e.status == "ok", e.total_reward)
                for e in record.episodes.get(s.submission_id, [])
            ],
        )
        for s in record.started
        if s.program_digest is not None  # ``started`` keeps those with a Program
    ]
    edges = lineage_of(
        initial,
        inputs,
        direction=record.direction,
        failure_score=record.failure_score,
        lines_of=programs.lines_of,
    )
    return {
        item.submission_id: SubmissionLineage(
            parent_submission_id=0
            if edge.parent_submission_id is None
            else edge.parent_submission_id,
            parent_basis=edge.parent_basis,
            parent_distance=edge.parent_distance,
            edit_kind=programs.edit_kind(edge.parent_digest, item.program_digest),
            matched_indices=edge.matched_indices,
            matched_score=edge.matched_score,
            parent_matched_score=edge.parent_matched_score,
            beats_parent=edge.beats_parent,
            best_so_far=edge.best_so_far,
            best_so_far_score=edge.best_so_far_score,
            best_so_far_basis=edge.best_so_far_basis,
            best_so_far_matched=edge.best_so_far_matched,
        )
        for item in inputs
        for edge in (edges[item.submission_id],)
    }


def programs_of(store: Store) -> _Programs:
    """A Program cache over ``store``'s blobs, for ``lineage``."""
    return _Programs(store)

"""One Submission of a Run, and the bytes of the artifacts it published.

``/runs/{run}/submissions/{sid}`` shows the Submission's facts (status, scores, pool
indices, budget, Validation and Assessment), its parent and edit kind (the Run reader's
lineage, shared with the Run page), its program's files and the diff to its parent, the
Feedback as the Agent saw it (the fields of its workspace ``feedback.json``), its Episodes,
its videos and other artifacts. The Run's
stream is read once, decoding whole only this Submission's events (the others' are read for
their ids and programs, transcript chunks not at all).

``/runs/{run}/submissions/{sid}/artifacts/{name}`` answers the bytes of an artifact this
Submission's ``SubmissionPublished`` lists by that name, and nothing else: a media type from
a short list by the name's extension, any other as an attachment of plain text. A single
byte range is answered (206), so a player can seek.

Every recorded text is shown as text, redacted and with the Run's private values scrubbed
(``log_pages.RunText``); the diff is escaped line by line by the template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from evopolicygym.program import Program
from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.events import (
    ArtifactRef,
    AssessmentCompleted,
    CandidateAssessed,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    EventCodecError,
    RunCreated,
    SubmissionPublished,
)
from evopolicygym.records.feedback import feedback_document
from evopolicygym.records.runs import SubmissionSummary, run_id_of
from evopolicygym.report.diffs import diff_lines, program_diff
from evopolicygym.report.run_data import Lineage
from evopolicygym.report.videos import is_video
from evopolicygym.view import log_pages
from evopolicygym.view.app import Viewer, render, resolve_stream, viewer_of
from evopolicygym.view.log_pages import RunText, run_text
from evopolicygym.view.run_page import LINEAGE_RELOAD_S, LINEAGE_WAIT_S, readers_of

__all__ = [
    "FILE_LIMIT",
    "MEDIA_TYPES",
    "ROUTES",
    "SubmissionRecord",
    "read_submission",
    "served_type",
]

FILE_LIMIT = 1_000_000  # bytes of one program file shown in the page
MEDIA_TYPES = {
    "mp4": "video/mp4",
    "webm": "video/webm",
    "webp": "image/webp",
    "png": "image/png",
    "gif": "image/gif",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
}
_ARTIFACT_CACHE = 256  # Submissions whose artifact lists are kept


class _Ref(msgspec.Struct):
    """What the pass reads of another Submission's event: the rest is skipped."""

    submission_id: int | None = None
    program_digest: str | None = None


_REF = msgspec.json.Decoder(_Ref)
_STARTED = EvaluationStarted.type_name()
_OWN = frozenset(  # the events of one Submission the page reads whole
    t.type_name()
    for t in (
        EvaluationStarted,
        EpisodeCompleted,
        SubmissionPublished,
        EvaluationFailed,
        CandidateValidated,
        AssessmentCompleted,
        CandidateAssessed,
    )
)


@dataclass
class SubmissionRecord:
    """One Submission's events, and of the Run what its page needs besides."""

    summary: SubmissionSummary
    started: EvaluationStarted | None = None
    episodes: list[EpisodeCompleted] = field(default_factory=list)
    published: SubmissionPublished | None = None
    failed: EvaluationFailed | None = None
    created: RunCreated | None = None
    digests: dict[int, str] = field(default_factory=dict)  # each started one's (0: initial)
    version: int = 0  # the stream version read up to


def read_submission(viewer: Viewer, stream_id: str, submission_id: int) -> SubmissionRecord:
    """Submission ``submission_id`` of the Run ``stream_id``, in one pass over its stream."""
    record = SubmissionRecord(SubmissionSummary(submission_id))
    for envelope in viewer.store.events.read_stream(stream_id, 0):
        record.version = envelope.stream_version
        kind = envelope.type
        if kind not in _OWN and kind != RunCreated.type_name():
            continue  # transcript chunks above all: the bulk of a long Run
        try:
            if kind != RunCreated.type_name():
                ref = _REF.decode(envelope.payload)
                if kind == _STARTED and ref.submission_id is not None:
                    record.digests[ref.submission_id] = ref.program_digest or ""
                if ref.submission_id != submission_id:
                    continue
            event = envelope.event()
        except (msgspec.DecodeError, msgspec.ValidationError, EventCodecError):
            continue  # `record verify` names it; the page shows what decodes
        match event:
            case RunCreated():
                record.created = event
                record.digests[0] = event.initial_program_digest
                continue
            case EvaluationStarted():
                record.started = event
            case EpisodeCompleted():
                record.episodes.append(event)
            case SubmissionPublished():
                record.published = event
            case EvaluationFailed():
                record.failed = event
        record.summary.apply(event, envelope.recorded_at)
    return record


def _lineage(viewer: Viewer, stream_id: str, sid: int) -> tuple[Lineage | None, bool]:
    """The Submission's parent and edit kind, from the Run's reader (shared with the Run
    page: one lineage per Run), and whether it is still being read."""
    reader = readers_of(viewer).get(stream_id)
    with reader.lock:
        reader.catch_up()
        found, pending = reader.lineage(LINEAGE_WAIT_S)
    return found.get(sid), pending


# --------------------------------------------------------------------------- programs and diffs


def _program(viewer: Viewer, digest: str | None) -> Program | None:
    if not digest:
        return None
    try:
        return viewer.store.blobs.get_program(digest)
    except BlobError:  # missing or corrupt: `record verify` says which
        return None


def _files(program: Program, shown: RunText) -> list[dict[str, Any]]:
    out = []
    for path, data in program.files:
        text, note = None, None
        if len(data) > FILE_LIMIT:
            note = f"{len(data):,} bytes: too large to show here (the record keeps it)"
        else:
            try:
                text = shown.text(data.decode("utf-8"), None)
            except UnicodeDecodeError:
                note = f"a binary file of {len(data):,} bytes"
        out.append({"path": shown.text(path, 2_000), "size": len(data), "text": text, "note": note})
    return out


# --------------------------------------------------------------------------- Feedback


def _feedback_config(created: RunCreated | None) -> dict[str, Any]:
    config = created.config.get("feedback") if created is not None else None
    return config if isinstance(config, dict) else {}


def _shown_artifacts(record: SubmissionRecord, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The artifacts the Agent's feedback.json lists, as the workspace projection chooses
    them under the Run's Feedback condition (its retention aside)."""
    published = record.published
    if published is None:
        return []
    traces = config.get("traces", "benchmark")
    host_traces = traces != "benchmark"
    whole = None
    if config.get("content", True) is False:
        truncated = published.content.get("content_truncated")
        whole = truncated.get("artifact") if isinstance(truncated, dict) else None
    listed = [
        {"name": a.name, "media_type": a.media_type, "retention": a.retention, "size": a.size}
        for a in published.artifacts
        if not (host_traces and a.retention == "bulk")
        and not (whole is not None and a.name == whole and a.retention == "permanent")
    ]
    if host_traces:
        count = len(record.episodes) if traces == "all" else int(traces or 0)
        listed += [
            {
                "name": f"episode-{e.index}.trace.jsonl",
                "media_type": "application/jsonl",
                "retention": "bulk",
                "size": None,
            }
            for e in record.episodes[:count]
            if e.trace_blob is not None
        ]
    return listed


def _feedback(record: SubmissionRecord) -> dict[str, Any] | None:
    """The Submission's feedback.json in the Agent's workspace (``records.feedback``)."""
    started, config = record.started, _feedback_config(record.created)
    outcome = record.published or record.failed
    if started is None or outcome is None:
        return None
    budget = record.created.config.get("episode_budget") if record.created else None
    return feedback_document(
        started,
        record.episodes,
        outcome,
        _shown_artifacts(record, config),
        budget=budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
        show_episodes=config.get("episodes", True) is not False,
        show_content=config.get("content", True) is not False,
    )


# --------------------------------------------------------------------------- the page


def _artifact_href(run_id: str, sid: int, name: str) -> str:
    return f"/runs/{quote(run_id, safe='')}/submissions/{sid}/artifacts/{quote(name, safe='')}"


def served_type(name: str) -> str | None:
    """The media type the artifact route answers ``name`` with; None: as a text attachment."""
    return MEDIA_TYPES.get(name.rsplit(".", 1)[-1].lower()) if "." in name else None


def _artifacts(record: SubmissionRecord, run_id: str, shown: RunText) -> list[dict[str, Any]]:
    """Every artifact, a player for the videos (and animated images) the Benchmark made."""
    published = record.published
    if published is None:
        return []
    out = []
    for a in published.artifacts:
        served = served_type(a.name) or ""
        out.append(
            {
                "name": shown.text(a.name, 1_000),
                "href": _artifact_href(run_id, record.summary.submission_id, a.name),
                "media_type": shown.text(a.media_type, 200),
                "retention": a.retention,
                "size": a.size,
                "video": served.startswith("video/") and a.media_type.startswith("video/"),
                "image": served.startswith("image/")
                and (is_video(a) or a.media_type.startswith("image/")),
            }
        )
    return out


def _parent(record: SubmissionRecord, line: Lineage | None) -> tuple[int | None, str | None]:
    """The parent Submission (0: the initial program) and how it was found."""
    if line is not None and line.parent_submission_id is not None:
        return line.parent_submission_id, line.parent_basis
    started = record.started
    if started is not None and started.parent_submission_id is not None:
        return started.parent_submission_id, "stated"
    return None, None


def _diff(
    viewer: Viewer, record: SubmissionRecord, parent: int | None, shown: RunText
) -> tuple[list[tuple[str, str]], str | None]:
    """The diff's lines to the parent, or why there is none."""
    after = _program(viewer, record.summary.program_digest)
    if parent is None:
        return [], "no parent program to compare with"
    before = _program(viewer, record.digests.get(parent))
    if before is None or after is None:
        return [], "a program blob is missing (see record verify)"
    label = "initial" if parent == 0 else str(parent)
    diff = program_diff(
        dict(before.files), dict(after.files), label, str(record.summary.submission_id)
    )
    if not diff:
        return [], "the same program as its parent"
    return diff_lines(diff, lambda text: shown.text(text, None)), None


def _context(viewer: Viewer, run: str, sid: int) -> dict[str, Any]:
    stream_id = resolve_stream(viewer, run)
    run_id = run_id_of(stream_id) or stream_id
    record = read_submission(viewer, stream_id, sid)
    if record.started is None:
        raise HTTPException(404, f"Run {run_id} has no Submission {sid}")
    shown = run_text(viewer, stream_id, record.created)
    line, pending = _lineage(viewer, stream_id, sid)
    parent, basis = _parent(record, line)
    program = _program(viewer, record.summary.program_digest)
    diff, diff_note = _diff(viewer, record, parent, shown)
    started = sorted(k for k in record.digests if k > 0)
    summary = record.summary
    feedback = _feedback(record)
    return {
        "run_id": run_id,
        "sid": sid,
        "s": summary,
        "error": shown.text(summary.error, 5_000) if summary.error else None,
        "parent": parent,
        "parent_basis": basis,
        "edit_kind": line.edit_kind if line is not None else None,
        "lineage_pending": pending,
        "reload_s": LINEAGE_RELOAD_S if pending else None,
        "beats_parent": line.beats_parent if line is not None else None,
        "files": _files(program, shown) if program is not None else None,
        "diff": diff,
        "diff_note": diff_note,
        "feedback": shown.pretty(feedback, None) if feedback is not None else None,
        "episodes": [
            {
                "index": e.index,
                "status": e.status,
                "total_reward": e.total_reward,
                "steps": e.steps,
                "duration_s": e.duration_s,
                "failure": shown.text(e.failure, 5_000) if e.failure else None,
                "output_tail": shown.text(e.output_tail, 5_000) if e.output_tail else None,
            }
            for e in record.episodes
        ],
        "artifacts": _artifacts(record, run_id, shown),
        "prev_sid": max((k for k in started if k < sid), default=None),
        "next_sid": min((k for k in started if k > sid), default=None),
    }


async def submission(request: Request) -> Response:
    viewer = viewer_of(request)
    run, sid = request.path_params["run"], int(request.path_params["sid"])
    context = await run_in_threadpool(_context, viewer, run, sid)
    return render(request, "submission.html", live_run=context["run_id"], **context)


# --------------------------------------------------------------------------- artifacts

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _published(viewer: Viewer, stream_id: str, sid: int) -> SubmissionPublished | None:
    kind = SubmissionPublished.type_name()
    for envelope in viewer.store.events.read_stream(stream_id, 0):
        if envelope.type != kind:
            continue
        try:
            if _REF.decode(envelope.payload).submission_id != sid:
                continue
            event = envelope.event()
        except (msgspec.DecodeError, msgspec.ValidationError, EventCodecError):
            continue
        if isinstance(event, SubmissionPublished):
            return event
    return None


def _listed(viewer: Viewer, stream_id: str, sid: int) -> list[ArtifactRef]:
    """The artifacts Submission ``sid`` published, kept once found: a player asks for a
    video in many ranges, and a recorded publication never changes."""
    cache: dict[tuple[str, int], list[ArtifactRef]] = viewer.extra.setdefault("pages.artifacts", {})
    found = cache.get((stream_id, sid))
    if found is None:
        published = _published(viewer, stream_id, sid)
        if published is None:
            return []  # not (yet) published: asked again later, it may be
        if len(cache) >= _ARTIFACT_CACHE:
            cache.pop(next(iter(cache)))
        found = cache[(stream_id, sid)] = list(published.artifacts)
    return found


def _artifact_bytes(viewer: Viewer, run: str, sid: int, name: str) -> tuple[ArtifactRef, bytes]:
    stream_id = resolve_stream(viewer, run)
    ref = next((a for a in _listed(viewer, stream_id, sid) if a.name == name), None)
    if ref is None:
        raise HTTPException(404, f"Submission {sid} published no artifact of that name")
    try:
        return ref, viewer.store.blobs.get(ref.blob)
    except BlobError:
        raise HTTPException(404, "that artifact is not kept in the store (retention)") from None


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range ``header`` asks for, as [start, end]; None for the whole body (no
    header, several ranges, one that does not parse); 416 when it lies past the end."""
    match = _RANGE.match(header.strip()) if header else None
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":  # the last N bytes
        count = int(last)
        if count == 0:
            raise HTTPException(416, "range not satisfiable")
        return max(0, size - count), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        raise HTTPException(416, "range not satisfiable")
    return start, end


async def artifact(request: Request) -> Response:
    viewer = viewer_of(request)
    run, sid = request.path_params["run"], int(request.path_params["sid"])
    name = request.path_params["name"]
    ref, data = await run_in_threadpool(_artifact_bytes, viewer, run, sid, name)
    media = served_type(ref.name)
    headers = {"accept-ranges": "bytes", "cache-control": "private, max-age=300"}
    if media is None:  # shown as text, never as a page of the viewer's origin
        media = "text/plain; charset=utf-8"
        headers["content-disposition"] = f"attachment; filename*=UTF-8''{quote(ref.name, safe='')}"
    try:
        span = _byte_range(request.headers.get("range"), len(data))
    except HTTPException:
        headers["content-range"] = f"bytes */{len(data)}"
        return Response(b"", status_code=416, headers=headers)
    if span is None:
        return Response(data, media_type=media, headers=headers)
    start, end = span
    headers["content-range"] = f"bytes {start}-{end}/{len(data)}"
    return Response(data[start : end + 1], status_code=206, media_type=media, headers=headers)


ROUTES: list[BaseRoute] = [
    Route("/runs/{run}/submissions/{sid:int}", submission, name="submission"),
    Route("/runs/{run}/submissions/{sid:int}/artifacts/{name:path}", artifact, name="artifact"),
    # The conversation and the event log, served from here until app.py lists log_pages.
    *log_pages.ROUTES,
]

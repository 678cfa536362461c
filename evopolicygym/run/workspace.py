"""The Agent's workspace: its editable program, read-only feedback and scratch space.

Layout under the workspace root::

    TASK.md, task.json      the task, written by the Host
    program/                the Agent's editable program (initially the Run's initial Program)
    feedback/               read-only, a pure projection of the Run's log and blobs
        submission-0001/feedback.json
        submission-0001/artifacts/<artifact name>
        latest.json         the newest Submission's feedback.json
    analysis/               the Agent's own scratch space

``feedback/`` is rebuilt from the log alone, so a resumed Run shows exactly what an
uninterrupted one would. It carries only what the Agent may see: never seeds, scenarios,
timings, nor validation or assessment results. How much of each Submission it shows is the
Run's recorded ``FeedbackConfig``: by default the Benchmark's artifacts and content and the
per-Episode rows; a Run may instead show the Host's recorded trace of some Episodes
(``artifacts/episode-<index>.trace.jsonl``), or withhold the rows or the content.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.program import Program
from evopolicygym.records.blobcodec import BlobMissing
from evopolicygym.records.events import (
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    RunCreated,
    SubmissionPublished,
)
from evopolicygym.records.feedback import AGENT_FAULT_MESSAGE, feedback_document
from evopolicygym.records.store import BlobStore
from evopolicygym.records.traces import decode_trace
from evopolicygym.run.config import FeedbackConfig

__all__ = [
    "AGENT_FAULT_MESSAGE",
    "ANALYSIS_DIR",
    "FEEDBACK_DIR",
    "LATEST",
    "PROGRAM_DIR",
    "TASK_JSON",
    "TASK_MD",
    "TraceCache",
    "build_feedback",
    "feedback_dir_name",
    "rebuild_workspace",
    "sync_feedback",
    "trace_artifact_name",
]


PROGRAM_DIR = "program"
FEEDBACK_DIR = "feedback"
ANALYSIS_DIR = "analysis"
TASK_MD = "TASK.md"
TASK_JSON = "task.json"
LATEST = "latest.json"
FEEDBACK_FILE = "feedback.json"
ARTIFACTS_DIR = "artifacts"

_TMP_PREFIX = ".tmp-"
_FILE_MODE = 0o444
_DIR_MODE = 0o555
_MAX_NAME_BYTES = 255


def feedback_dir_name(submission_id: int) -> str:
    """``submission-0001``: zero-padded so a directory listing sorts by id."""
    return f"submission-{submission_id:04d}"


# --------------------------------------------------------------------------- projection


@dataclass
class _Submission:
    started: EvaluationStarted
    episodes: list[EpisodeCompleted] = field(default_factory=list)
    outcome: SubmissionPublished | EvaluationFailed | None = None


def _canonical(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    # A lone surrogate (from a JSON escape in a recorded string) has no UTF-8 form.
    return text.encode("utf-8", "replace")


def _safe_name(name: str) -> bool:
    """Whether an artifact name is one plain file name (Benchmarks choose them freely)."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return (
        0 < size <= _MAX_NAME_BYTES
        and name not in (".", "..")
        and not name.startswith(_TMP_PREFIX)
        and not any(c in name for c in "/\\\x00")
    )


def _fold(events: Sequence[Event]) -> tuple[int | None, dict[int, _Submission]]:
    """The episode budget and each Submission's public facts, in log order."""
    budget: int | None = None
    submissions: dict[int, _Submission] = {}
    for event in events:
        match event:
            case RunCreated():
                value = event.config.get("episode_budget")
                budget = value if isinstance(value, int) and not isinstance(value, bool) else None
            case EvaluationStarted():
                submissions.setdefault(event.submission_id, _Submission(event))
            case EpisodeCompleted():
                # Facts about a Submission never started are a broken log ('record verify'
                # reports it); the projection skips them rather than stop the Run.
                if (entry := submissions.get(event.submission_id)) is not None:
                    entry.episodes.append(event)
            case SubmissionPublished() | EvaluationFailed():
                entry = submissions.get(event.submission_id)
                if entry is not None and entry.outcome is None:
                    entry.outcome = event
            case _:
                # Everything else is either the Agent's own doing or Host-private.
                pass
    return budget, submissions


@dataclass(frozen=True)
class _Shown:
    """An artifact the Agent may be shown: its listing and how to read its bytes."""

    name: str
    media_type: str
    retention: str
    size: int | None  # None: a Host trace whose blob is gone (never rendered)
    read: Callable[[], bytes]


def _benchmark_artifacts(
    outcome: SubmissionPublished,
    shown: FeedbackConfig,
    blobs: BlobStore,
    cache: TraceCache,
    written: set[str],
) -> list[_Shown]:
    """The Benchmark's artifacts the condition shows: all by default; without its bulk ones
    when the Host's traces stand in for them, without the whole-content one when the
    content is withheld."""
    truncated = outcome.content.get("content_truncated") if shown.content is False else None
    whole = truncated.get("artifact") if isinstance(truncated, dict) else None
    return [
        _Shown(
            ref.name,
            ref.media_type,
            ref.retention,
            ref.size,
            functools.partial(cache.blob, blobs, ref.blob, written),
        )
        for ref in outcome.artifacts
        if not (shown.host_traces and ref.retention == "bulk")
        and not (whole is not None and ref.name == whole and ref.retention == "permanent")
    ]


TRACE_MEDIA_TYPE = "application/jsonl"
_TRACE_JSON = msgspec.json.Encoder()
_TraceKey = tuple[str, int, int | None]  # (trace blob, pool index, steps shown)


class TraceCache:
    """What one Run's feedback builds share, kept between publications: each builds the
    whole feedback again from the log, and most of it is what the last build made.

    - Rendered Host traces, which follow from their key alone. Sizes (what retention
      decides on) are kept for every trace met, so one pruned is not rendered again.
    - The Benchmark artifacts' bytes, by blob.
    - Each concluded Submission's ``feedback.json``, by what can still change it (which of
      its artifacts are written or pruned).

    Bytes are kept only for what the last build wrote (about the retention's worth, which
    the feedback files hold anyway)."""

    MAX_SIZES = 1 << 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes: dict[_TraceKey, bytes] = {}
        self._sizes: dict[_TraceKey, int | None] = {}
        self._blobs: dict[str, bytes] = {}
        self._documents: dict[_DocumentKey, bytes] = {}
        self._shown: FeedbackConfig | None = None

    def size(self, blobs: BlobStore, key: _TraceKey) -> int | None:
        """The rendered size; None if the blob is not a trace; ``BlobMissing`` if it is gone."""
        with self._lock:
            if key in self._sizes:
                return self._sizes[key]
        data = self.read(blobs, key)
        return None if data is None else len(data)

    def read(self, blobs: BlobStore, key: _TraceKey) -> bytes | None:
        with self._lock:
            if key in self._bytes:
                return self._bytes[key]
        blob, index, steps = key
        rendered = _render_trace(blobs.get(blob), index, steps)
        with self._lock:
            if len(self._sizes) >= self.MAX_SIZES:
                self._sizes.clear()
            self._sizes[key] = None if rendered is None else len(rendered)
            if rendered is not None:
                self._bytes[key] = rendered
        return rendered

    def blob(self, blobs: BlobStore, blob: str, written: set[str]) -> bytes:
        """An artifact's bytes (``BlobMissing`` if it is gone), noted as written."""
        written.add(blob)
        with self._lock:
            data = self._blobs.get(blob)
        if data is None:
            data = blobs.get(blob)
            with self._lock:
                self._blobs[blob] = data
        return data

    def documents(self, shown: FeedbackConfig) -> dict[_DocumentKey, bytes]:
        """The rendered ``feedback.json`` files of the last build with the condition ``shown``."""
        with self._lock:
            if self._shown != shown:
                self._documents, self._shown = {}, shown
            return self._documents

    def keep(
        self,
        keys: set[_TraceKey],
        blobs: set[str] | None = None,
        documents: dict[_DocumentKey, bytes] | None = None,
    ) -> None:
        """Forget the bytes of every trace but ``keys``, of every artifact but ``blobs`` and
        every document but ``documents`` (those the last build wrote)."""
        with self._lock:
            self._bytes = {k: v for k, v in self._bytes.items() if k in keys}
            self._blobs = {k: v for k, v in self._blobs.items() if blobs is not None and k in blobs}
            if documents is not None:
                self._documents = documents


# A concluded Submission's feedback.json follows from its id and its artifacts' fate (the
# log's events about it never change once it has concluded).
_DocumentKey = tuple[int, tuple[tuple[str, "str | None", bool], ...]]


def trace_artifact_name(index: int) -> str:
    """``episode-3.trace.jsonl``: the Host's trace of pool Episode 3."""
    return f"episode-{index}.trace.jsonl"


def _render_trace(data: bytes, index: int, steps: int | None) -> bytes | None:
    """A recorded trace as JSON lines, one per step ({episode, t, action, reward, terminated,
    truncated, observation}, the observation after the action; a tensor's data in base64),
    the first ``steps`` of them; None if the blob is not a trace."""
    try:
        trace = decode_trace(data)
        lines = [
            _TRACE_JSON.encode(
                {
                    "episode": index,
                    "t": t,
                    "action": action,
                    "reward": reward,
                    "terminated": terminated,
                    "truncated": truncated,
                    "observation": observation,
                }
            )
            for t, (action, reward, terminated, truncated, observation) in enumerate(
                trace.steps[:steps]
            )
        ]
    except (ValueError, TypeError, msgspec.EncodeError):
        return None
    return b"".join(line + b"\n" for line in lines)


def _host_traces(
    entry: _Submission,
    shown: FeedbackConfig,
    blobs: BlobStore,
    cache: TraceCache,
    written: set[_TraceKey],
) -> list[_Shown]:
    """The Host's recorded trace of each of the Submission's first N Episodes (in the order
    it selected them) that has one, as bulk artifacts."""
    traced: list[_Shown] = []
    for event in entry.episodes[: shown.trace_count(len(entry.episodes))]:
        if event.trace_blob is None:
            continue
        name = trace_artifact_name(event.index)
        key = (event.trace_blob, event.index, shown.trace_steps)
        try:
            size = cache.size(blobs, key)
        except BlobMissing:
            traced.append(
                _Shown(
                    name,
                    TRACE_MEDIA_TYPE,
                    "bulk",
                    None,
                    functools.partial(_missing, event.trace_blob),
                )
            )
            continue
        if size is not None:
            traced.append(
                _Shown(
                    name,
                    TRACE_MEDIA_TYPE,
                    "bulk",
                    size,
                    functools.partial(_read_trace, cache, blobs, key, written),
                )
            )
    return traced


def _read_trace(
    cache: TraceCache, blobs: BlobStore, key: _TraceKey, written: set[_TraceKey]
) -> bytes:
    written.add(key)
    data = cache.read(blobs, key)
    if data is None:  # its size was read before: the blob is no longer the trace it was
        raise BlobMissing(key[0], "trace")
    return data


def _missing(blob: str) -> bytes:
    raise BlobMissing(blob, "trace")


def build_feedback(
    events: Sequence[Event],
    blobs: BlobStore,
    retention_bytes: int,
    shown: FeedbackConfig | None = None,
    traces: TraceCache | None = None,
) -> dict[str, bytes]:
    """The files of ``feedback/`` (relative path -> bytes) for a Run's events, showing what
    the Run's Feedback condition ``shown`` shows (None: the default); ``traces`` keeps the
    Run's rendered Host traces from one build to the next.

    Pure: the same events and blobs give byte-identical files. Bulk artifacts are kept
    newest Submission first: the newest Submission's always, an older one's only while
    the kept bulk bytes stay within ``retention_bytes``; after the first that does not fit,
    every older bulk artifact is pruned too, so a pruned artifact never comes back.
    """
    shown = shown or FeedbackConfig()
    cache = traces if traces is not None else TraceCache()
    written: set[_TraceKey] = set()
    written_blobs: set[str] = set()
    rendered = cache.documents(shown)
    documents: dict[_DocumentKey, bytes] = {}
    budget, submissions = _fold(events)
    concluded = sorted(sid for sid, entry in submissions.items() if entry.outcome is not None)
    files: dict[str, bytes] = {}
    kept_bulk = 0
    exhausted = False
    for rank, sid in enumerate(reversed(concluded)):
        entry = submissions[sid]
        outcome = entry.outcome
        directory = feedback_dir_name(sid)
        artifacts: list[dict[str, Any]] = []
        listed: list[_Shown] = []
        if isinstance(outcome, SubmissionPublished):
            listed = _benchmark_artifacts(outcome, shown, blobs, cache, written_blobs)
            if shown.host_traces:
                listed += _host_traces(entry, shown, blobs, cache, written)
        names: set[str] = set()
        for item in listed:
            path: str | None = None
            pruned = False
            size = item.size or 0
            if not _safe_name(item.name) or item.name in names:
                pass  # listed, never written: it cannot be a file of its own in artifacts/
            elif (
                item.retention == "permanent"
                or rank == 0
                or (not exhausted and kept_bulk + size <= retention_bytes)
            ):
                try:
                    data = item.read()
                except BlobMissing:
                    # Removed from the store: the Agent sees it as pruned, not a crashed Run.
                    pruned = True
                else:
                    path = f"{directory}/{ARTIFACTS_DIR}/{item.name}"
                    files[path] = data
                    if item.retention == "bulk":
                        kept_bulk += size
            else:
                exhausted = True
                pruned = True
            names.add(item.name)
            artifacts.append(
                {
                    "name": item.name,
                    "media_type": item.media_type,
                    "retention": item.retention,
                    "size": item.size,
                    "path": path,
                    "pruned": pruned,
                }
            )
        key: _DocumentKey = (sid, tuple((a["name"], a["path"], a["pruned"]) for a in artifacts))
        raw = rendered.get(key) or _document(sid, entry, artifacts, budget, shown)
        documents[key] = raw
        files[f"{directory}/{FEEDBACK_FILE}"] = raw
        if rank == 0:
            files[LATEST] = raw
    cache.keep(written, written_blobs, documents)
    return files


def _document(
    sid: int,
    entry: _Submission,
    artifacts: list[dict[str, Any]],
    budget: int | None,
    shown: FeedbackConfig,
) -> bytes:
    """A concluded Submission's ``feedback.json`` (``records.feedback`` defines it)."""
    outcome = entry.outcome
    assert isinstance(outcome, SubmissionPublished | EvaluationFailed)
    assert entry.started.submission_id == sid
    document = feedback_document(
        entry.started,
        entry.episodes,
        outcome,
        artifacts,
        budget=budget,
        show_episodes=shown.episodes,
        show_content=shown.content,
    )
    return _canonical(document)


# --------------------------------------------------------------------------- files on disk


def _check_relpath(path: str) -> None:
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")  # what PurePosixPath.is_absolute says, without its parse
        or any(p in ("", ".", "..") or p.startswith(_TMP_PREFIX) for p in parts)
        or "\\" in path
        or "\x00" in path
    ):
        raise ValueError(f"{path!r} is not a normalized relative feedback path")


def _write_atomic(final: str | Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``final`` by a rename, so a reader sees the old bytes or the new, never half.
    No fsync: everything written here is rebuilt from the log on resume."""
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=os.path.dirname(final))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _scan(root: str) -> tuple[list[str], list[str]]:
    """Relative paths of the directories and of everything else under ``root``, never
    following a symlink (one planted in feedback/ must not redirect the Host's writes)."""
    dirs: list[str] = []
    others: list[str] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(f"{root}/{rel_dir}" if rel_dir else root) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(rel)
                    stack.append(rel)
                else:
                    others.append(rel)
    return dirs, others


def _ensure_real_dir(path: str, mode: int = 0o755) -> None:
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isdir(path)):
        os.unlink(path)
    if not os.path.isdir(path):
        os.mkdir(path, mode)


def _same_file(path: str, data: bytes) -> bool:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return False
    with open(path, "rb") as handle:
        return handle.read() == data


def _set_modes(root: str) -> None:
    """Files 0444, directories 0555: feedback is read-only for the Agent."""
    dirs, others = _scan(root)
    for rel in others:
        target = f"{root}/{rel}"
        if not os.path.islink(target):
            os.chmod(target, _FILE_MODE)
    for rel in dirs:
        os.chmod(f"{root}/{rel}", _DIR_MODE)
    os.chmod(root, _DIR_MODE)


def sync_feedback(workspace: Path, files: dict[str, bytes]) -> None:
    """Make ``workspace/feedback`` hold exactly ``files`` (paths relative to it).

    Unchanged files are left alone; changed and new ones are replaced by rename, the
    newest Submission's ``latest.json`` last so it never names files not yet there.
    Idempotent, and safe for a non-root Host: write bits come back only while syncing.
    Paths are plain strings here: a Run's feedback holds a file or more per Submission,
    and this runs after every one of them.
    """
    for path in files:
        _check_relpath(path)
    wanted_dirs = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
    if clash := sorted(wanted_dirs.intersection(files)):
        raise ValueError(f"{clash[0]!r} is both a feedback file and a directory")
    root = os.path.join(os.fspath(workspace), FEEDBACK_DIR)
    _ensure_real_dir(root)
    try:
        os.chmod(root, 0o755)
        dirs, others = _scan(root)
        for rel in dirs:
            os.chmod(f"{root}/{rel}", 0o755)
        for rel in others:
            if rel not in files:
                os.unlink(f"{root}/{rel}")
        # Shallowest first: removing a directory removes what is under it.
        for rel in sorted(dirs, key=lambda d: d.count("/")):
            if rel not in wanted_dirs and os.path.isdir(f"{root}/{rel}"):
                shutil.rmtree(f"{root}/{rel}")
        # Parents first; a file (or symlink) where a directory belongs is replaced.
        existing = set(dirs)
        for rel in sorted(wanted_dirs, key=lambda d: d.count("/")):
            if rel not in existing:
                _ensure_real_dir(f"{root}/{rel}")
        for rel in sorted(files, key=lambda p: (p == LATEST, p)):
            target = f"{root}/{rel}"
            if not _same_file(target, files[rel]):
                _write_atomic(target, files[rel], _FILE_MODE)
    finally:
        _set_modes(root)


# --------------------------------------------------------------------------- the layout


def _prepare(workspace: Path, program: Program, task_md: str, task_json: bytes) -> None:
    """Everything of the layout but feedback/."""
    workspace.mkdir(parents=True, exist_ok=True)
    program_dir = workspace / PROGRAM_DIR
    if not os.path.lexists(program_dir):
        # Written beside and renamed in: a crash never leaves a half program that a
        # resume would then keep as the Agent's own edits.
        staging = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX + "program-", dir=workspace))
        try:
            program.write_to(staging)
            os.chmod(staging, 0o755)
            os.rename(staging, program_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    (workspace / ANALYSIS_DIR).mkdir(exist_ok=True)
    _write_atomic(workspace / TASK_MD, task_md.encode("utf-8"), 0o644)
    _write_atomic(workspace / TASK_JSON, bytes(task_json), 0o644)


def rebuild_workspace(
    workspace: Path,
    events: Sequence[Event],
    blobs: BlobStore,
    retention_bytes: int,
    initial_program: Program,
    task_md: str,
    task_json: bytes,
    shown: FeedbackConfig | None = None,
    traces: TraceCache | None = None,
) -> None:
    """The workspace of a resumed Run: a missing ``program/`` becomes the newest submitted
    Program (else the initial one), and ``feedback/`` is projected from the log."""
    workspace = Path(workspace)
    # Built first: a missing blob fails here, before anything on disk changes.
    files = build_feedback(events, blobs, retention_bytes, shown, traces)
    program = initial_program
    if not os.path.lexists(workspace / PROGRAM_DIR):
        submitted = [e.program_digest for e in events if isinstance(e, EvaluationStarted)]
        if submitted:
            program = blobs.get_program(submitted[-1])
    _prepare(workspace, program, task_md, task_json)
    sync_feedback(workspace, files)

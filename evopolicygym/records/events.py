"""Typed events: the Run lifecycle catalogue, the envelope, the payload codec and upcasting.

Every event type is a frozen ``msgspec.Struct`` subclass of ``Event``; its class
name is its stable type name and ``SCHEMA_VERSION`` its payload version. A
payload is canonical JSON (sorted keys), so its hash is reproducible and the
log is readable with any SQLite client. Old payload versions are upcast on
read by registered functions ``(type, vN) -> vN+1`` over plain dicts.

Conventions the verifier relies on: a field named ``*_blob`` (or ``blob``)
holds a blob digest; a field named ``*program_digest`` holds a Program digest;
``*_blobs`` and ``*program_digests`` hold lists of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import msgspec

from evopolicygym.transcript import AgentIdentity, Message

__all__ = [
    "EVENT_TYPES",
    "RENAMED_TERMINATIONS",
    "AgentExited",
    "AgentMessages",
    "AgentStarted",
    "ArtifactRef",
    "AssessmentCompleted",
    "AssessmentFailed",
    "AssessmentStarted",
    "CandidateAssessed",
    "CandidateValidated",
    "CellRunAssigned",
    "CellRunEnded",
    "Envelope",
    "EpisodeCompleted",
    "EpisodeOutcome",
    "EvaluationFailed",
    "EvaluationStarted",
    "Event",
    "EventCodecError",
    "ExperimentAgent",
    "ExperimentBenchmark",
    "ExperimentCell",
    "ExperimentCreated",
    "FinalSubmissionSelected",
    "FinishAccepted",
    "FinishRejected",
    "NewEvent",
    "PoolEntry",
    "ReferenceValidated",
    "RunCreated",
    "RunFinished",
    "RunInterrupted",
    "RunResumed",
    "SubmissionPublished",
    "SubmissionRejected",
    "TerminalReason",
    "ValidationFailed",
    "ValidationStarted",
    "current_terminations",
    "decode_event",
    "encode_payload",
    "event_schema",
    "new_event",
    "payload_hash",
    "register_upcaster",
]


class EventCodecError(ValueError):
    """A payload that does not decode as its declared type and version."""


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every event. Subclasses set ``SCHEMA_VERSION`` when their payload changes."""

    SCHEMA_VERSION: ClassVar[int] = 1

    @classmethod
    def type_name(cls) -> str:
        return cls.__name__


# --------------------------------------------------------------------------- shared parts


class PoolEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One Episode of the Run-local pool. Host-private: the Agent knows only ``index``."""

    index: int
    split: str
    seed: int
    policy_seed: int
    scenario: dict[str, Any] = {}


class ArtifactRef(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    media_type: str
    retention: Literal["permanent", "bulk"]
    blob: str
    size: int


class EpisodeOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """A public per-Episode summary (no seeds)."""

    index: int
    status: str
    total_reward: float
    steps: int
    failure: str | None = None


TerminalReason = Literal[
    "finished",
    "agent_exited",
    "budget_exhausted",
    "agent_failed",
    "evaluation_failed",
    "validation_failed",
    "assessment_failed",
    "interrupted",
]


# --------------------------------------------------------------------------- the Run lifecycle


class RunCreated(Event, frozen=True, kw_only=True):
    # v2: the Episode pool is a blob (``pool_blob``), no longer inline in ``pool``.
    SCHEMA_VERSION = 2

    run_id: str
    config: dict[str, Any]
    benchmark_id: str
    benchmark_spec: dict[str, Any]
    environment_digest: str
    initial_program_digest: str
    agent: AgentIdentity
    # Host-private, the Episode pool: the digest of its manifest blob (records.pools), so no
    # event holds a list as long as the budget. Runs recorded before (v1) carry the pool
    # inline in ``pool`` instead; a new Run's ``pool`` is empty.
    pool: list[PoolEntry] = []
    pool_blob: str | None = None
    seeds: dict[str, int] = {}  # Host-private: derived validation/assessment seeds
    skill_program_digests: list[
        str
    ] = []  # skill directories given to the Agent, stored as programs
    # How the Agent was contained: "namespaces" (its jail held), or "none" where the Run was
    # started with --allow-uncontained-agent (or containment turned off) and no jail could
    # be set up. None: recorded before the Host checked.
    agent_containment: str | None = None


class AgentStarted(Event, frozen=True, kw_only=True):
    attempt: int
    command: list[str] = []
    pid: int | None = None
    # The tools the Agent is offered, as OpenAI-style schemas, where the Host knows them
    # exactly (the built-in agents); None for a CLI whose tools only its calls tell.
    tools: list[dict[str, Any]] | None = None


class AgentMessages(Event, frozen=True, kw_only=True):
    attempt: int
    chunk: int
    messages: list[Message]
    raw_blob: str | None = None
    # None: a chunk of the live stream. Else the attempt's whole transcript as the CLI's
    # own session record holds it (say ``codex-rollout``), read when the attempt ended:
    # the model's exact calls and per-response usage, where the stream shows less. The
    # stream's chunks stay; readers that want what the model saw and said take this one.
    source: str | None = None
    # With ``source``: the tools the CLI offered the model, as OpenAI-style function
    # schemas, where its record lists them (Kimi Code's); None where it does not (Claude
    # Code's stream names tools otherwise than its requests do, so it is not taken).
    tools: list[dict[str, Any]] | None = None


class SubmissionRejected(Event, frozen=True, kw_only=True):
    request_id: str
    code: str
    message: str
    program_digest: str | None = None
    selector: str | None = None


class EvaluationStarted(Event, frozen=True, kw_only=True):
    submission_id: int
    program_digest: str
    # The program the edit started from: the one the Agent named (parent_submission_id;
    # 0 is the initial program), else the previous Submission's (the Host's guess).
    parent_program_digest: str | None = None
    indices: list[int]
    budget_reserved: int
    budget_used: int  # after this reservation
    parent_submission_id: int | None = None


class EpisodeCompleted(Event, frozen=True, kw_only=True):
    submission_id: int
    index: int  # pool index
    status: str
    total_reward: float
    steps: int
    failure: str | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    trace_blob: str | None = None


class SubmissionPublished(Event, frozen=True, kw_only=True):
    # v2: an Episode cut at the step limit is ``truncated`` in ``content`` (v1 said ``timed_out``).
    SCHEMA_VERSION = 2

    submission_id: int
    program_digest: str
    score: float
    failures: int
    content: dict[str, Any] = {}
    artifacts: list[ArtifactRef] = []
    budget_used: int
    budget_left: int


class EvaluationFailed(Event, frozen=True, kw_only=True):
    submission_id: int
    error: str
    budget_consumed: int  # reserved budget is never refunded after a trusted fault


class FinishRejected(Event, frozen=True, kw_only=True):
    request_id: str
    code: str
    message: str
    candidates: list[int] = []


class FinishAccepted(Event, frozen=True, kw_only=True):
    request_id: str
    candidates: list[int]


class AgentExited(Event, frozen=True, kw_only=True):
    attempt: int
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    stdout_blob: str | None = None
    stderr_blob: str | None = None
    # What the stream parser made of the attempt's stdout beyond its messages: the kinds
    # of lines it did not know, with their counts (they stay in the raw stream), and the
    # error records (API errors, a failed login) with the last one's text.
    unknown_kinds: dict[str, int] = {}
    errors: int = 0
    last_error: str | None = None


class ValidationStarted(Event, frozen=True, kw_only=True):
    candidates: list[int]
    split: str
    episodes: int
    seed: int  # Host-private
    # Who named the candidates: the Agent (its accepted finish) or the Host (nomination,
    # asked for by the Run). None in a Run made under rules 1, where readers tell it from
    # whether a FinishAccepted came first.
    handoff: Literal["agent", "host"] | None = None


class ReferenceValidated(Event, frozen=True, kw_only=True):
    """The initial Program on the candidates' Validation Episodes: the reference a final
    Program must beat to have improved (never selectable)."""

    program_digest: str
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []


class CandidateValidated(Event, frozen=True, kw_only=True):
    submission_id: int
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []


class ValidationFailed(Event, frozen=True, kw_only=True):
    error: str


class FinalSubmissionSelected(Event, frozen=True, kw_only=True):
    submission_id: int
    program_digest: str
    score: float
    reason: str = ""


class AssessmentStarted(Event, frozen=True, kw_only=True):
    submission_id: int
    split: str
    episodes: int
    seed: int  # Host-private


class AssessmentCompleted(Event, frozen=True, kw_only=True):
    # v2: an Episode cut at the step limit is ``truncated`` in ``content`` (v1 said ``timed_out``).
    SCHEMA_VERSION = 2

    submission_id: int
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []
    content: dict[str, Any] = {}


class AssessmentFailed(Event, frozen=True, kw_only=True):
    error: str


class CandidateAssessed(Event, frozen=True, kw_only=True):
    """A validated candidate that was not selected, assessed on the selected Program's
    Assessment Episodes (the Run's ``assessment.candidates``), so a study can compare
    Validation's ranking with held-out scores. It measures, never selects. ``error`` set:
    that candidate's Assessment failed (``score`` None), and the Run goes on."""

    # v2: an Episode cut at the step limit is ``truncated`` in ``content`` (v1 said ``timed_out``).
    SCHEMA_VERSION = 2

    submission_id: int
    score: float | None = None
    failures: int = 0
    episodes: list[EpisodeOutcome] = []
    content: dict[str, Any] = {}
    error: str | None = None


class RunInterrupted(Event, frozen=True, kw_only=True):
    reason: str
    last_position: int = 0


class RunResumed(Event, frozen=True, kw_only=True):
    attempt: int


class RunFinished(Event, frozen=True, kw_only=True):
    reason: TerminalReason
    final_submission_id: int | None = None
    validation_score: float | None = None
    assessment_score: float | None = None
    # Rules 2 (None before): who named the candidates (``none``: nobody, so no final
    # Program), the initial Program's Validation score, and whether the final Program
    # beat it there.
    handoff: Literal["agent", "host", "none"] | None = None
    reference_score: float | None = None
    improved: bool | None = None


# --------------------------------------------------------------------------- experiments
# An experiment's own stream (``experiment-<id>``, records.experiments) says which Runs
# stand for the cells of its matrix; the Runs' own streams are untouched by it.


class ExperimentAgent(msgspec.Struct, frozen=True, kw_only=True):
    """One agent of an experiment: its label, provider and the options its Runs take."""

    name: str
    provider: str
    options: dict[str, Any] = {}


class ExperimentBenchmark(msgspec.Struct, frozen=True, kw_only=True):
    """One Benchmark of an experiment: its label, registry id and parameters."""

    name: str
    id: str
    params: dict[str, Any] = {}


class ExperimentCell(msgspec.Struct, frozen=True, kw_only=True):
    """One cell of the matrix; ``agent`` and ``benchmark`` are labels of the lists above.
    Its Run's config is the experiment's ``config`` with ``seed`` and the Benchmark's params."""

    cell_id: str
    agent: str
    benchmark: str
    seed: int
    agent_seed: int = 0


class ExperimentCreated(Event, frozen=True, kw_only=True):
    """An experiment and its resolved matrix (agents x Benchmarks x seeds x agent seeds)."""

    experiment_id: str
    spec_digest: str  # sha256 of the resolved matrix below: the same spec resolves to the same
    profile: str
    config: dict[str, Any]  # the resolved RunConfig every cell's Run shares (seed and params aside)
    agents: list[ExperimentAgent]
    benchmarks: list[ExperimentBenchmark]
    cells: list[ExperimentCell]


class CellRunAssigned(Event, frozen=True, kw_only=True):
    """Run ``run_id`` stands for the cell from now on (appended before the Run is created)."""

    cell_id: str
    run_id: str
    attempt: int  # 1-based; >1 is a retry


class CellRunEnded(Event, frozen=True, kw_only=True):
    """The cell's Run ended: ``outcome`` is its terminal reason (``create_failed`` where the
    Run could not be created); ``retryable`` where a fault, not the agent's result, ended it."""

    cell_id: str
    run_id: str
    attempt: int
    outcome: str
    retryable: bool
    error: str | None = None


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type_name(): cls
    for cls in (
        RunCreated,
        AgentStarted,
        AgentMessages,
        SubmissionRejected,
        EvaluationStarted,
        EpisodeCompleted,
        SubmissionPublished,
        EvaluationFailed,
        FinishRejected,
        FinishAccepted,
        AgentExited,
        ValidationStarted,
        ReferenceValidated,
        CandidateValidated,
        ValidationFailed,
        FinalSubmissionSelected,
        AssessmentStarted,
        AssessmentCompleted,
        AssessmentFailed,
        CandidateAssessed,
        RunInterrupted,
        RunResumed,
        RunFinished,
        ExperimentCreated,
        CellRunAssigned,
        CellRunEnded,
    )
}


# --------------------------------------------------------------------------- codec

_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODERS: dict[type[Event], msgspec.json.Decoder[Any]] = {}
_RAW = msgspec.json.Decoder()
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(type_name: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register ``fn(payload_vN) -> payload_vN+1`` for one event type."""

    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(type_name, from_version)] = fn
        return fn

    return register


def encode_payload(event: Event) -> bytes:
    """Canonical JSON of the event's fields (sorted keys, no whitespace)."""
    return _ENCODER.encode(event)


def payload_hash(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def decode_event(type_name: str, schema_version: int, payload: bytes) -> Event:
    """The typed event, upcast from older payload versions when needed."""
    cls = EVENT_TYPES.get(type_name)
    if cls is None:
        raise EventCodecError(f"unknown event type {type_name!r}")
    current = cls.SCHEMA_VERSION
    try:
        if schema_version == current:
            decoder = _DECODERS.get(cls)
            if decoder is None:
                decoder = _DECODERS[cls] = msgspec.json.Decoder(cls)
            return decoder.decode(payload)
        if schema_version > current:
            raise EventCodecError(
                f"{type_name} v{schema_version} is newer than this code (v{current})"
            )
        data: dict[str, Any] = _RAW.decode(payload)
        for version in range(schema_version, current):
            upcast = _UPCASTERS.get((type_name, version))
            if upcast is None:
                raise EventCodecError(f"no upcaster for {type_name} v{version} -> v{version + 1}")
            data = upcast(data)
        return msgspec.convert(data, cls)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventCodecError(f"{type_name} v{schema_version}: {exc}") from exc


def event_schema(cls: type[Event]) -> dict[str, Any]:
    """The JSON Schema of one event type's payload (checked in under schemas/events/)."""
    schema: dict[str, Any] = msgspec.json.schema(cls)
    schema["title"] = cls.type_name()
    schema["x-schema-version"] = cls.SCHEMA_VERSION
    return schema


@register_upcaster("RunCreated", 1)
def _run_created_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 carries its pool inline (``pool``) and no ``pool_blob``: a valid v2 payload as it is."""
    return payload


# Termination words Feedback content once used, and today's: the step limit was ``timed_out``
# before it was ``truncated`` (``policy_timeout``, a policy past its deadline, never changed).
RENAMED_TERMINATIONS = {"timed_out": "truncated"}


def current_terminations(content: dict[str, Any]) -> dict[str, Any]:
    """Feedback ``content`` with its termination words renamed as ``RENAMED_TERMINATIONS``
    says: each Episode's ``termination`` and the ``terminations`` counts. The one place the
    old words are mapped, so Runs recorded before keep their bytes (and hash chain) and read
    as today's."""
    content = dict(content)
    episodes = content.get("episodes")
    if isinstance(episodes, list):
        content["episodes"] = [
            {**e, "termination": RENAMED_TERMINATIONS.get(e["termination"], e["termination"])}
            if isinstance(e, dict) and isinstance(e.get("termination"), str)
            else e
            for e in episodes
        ]
    counts = content.get("terminations")
    if isinstance(counts, dict):
        renamed: dict[str, Any] = {}
        for word, count in counts.items():
            new = RENAMED_TERMINATIONS.get(str(word), str(word))
            both = isinstance(renamed.get(new), int) and isinstance(count, int)
            renamed[new] = renamed[new] + count if both else count
        content["terminations"] = renamed
    return content


@register_upcaster("SubmissionPublished", 1)
@register_upcaster("AssessmentCompleted", 1)
@register_upcaster("CandidateAssessed", 1)
def _content_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 Feedback content may say ``timed_out``; otherwise a valid v2 payload as it is."""
    content = payload.get("content")
    return (
        {**payload, "content": current_terminations(content)}
        if isinstance(content, dict)
        else payload
    )


# --------------------------------------------------------------------------- envelopes


class NewEvent(msgspec.Struct, frozen=True):
    """An event ready to append: its id (the idempotency key), type, version and payload."""

    event_id: str
    type: str
    schema_version: int
    payload: bytes


def new_event(event: Event, event_id: str) -> NewEvent:
    """Wrap an event for ``append``. Derive ``event_id`` deterministically where a retry
    must be recognised (for example from the stream, the command and a counter)."""
    if not event_id or len(event_id) > 200:
        raise ValueError("event_id must be a non-empty string of at most 200 characters")
    return NewEvent(event_id, event.type_name(), event.SCHEMA_VERSION, encode_payload(event))


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """A stored event: where it sits in the log, what it is, and its place in the hash chain."""

    position: int  # global, gap-free, equal to commit order
    stream_id: str
    stream_version: int
    event_id: str
    type: str
    schema_version: int
    recorded_at: int  # nanoseconds since the epoch
    payload: bytes
    payload_hash: str
    prev_hash: str
    hash: str

    def event(self) -> Event:
        return decode_event(self.type, self.schema_version, self.payload)

    def as_row(self) -> tuple[Any, ...]:
        """The fields as a tuple in declaration order: the row form bulk readers use."""
        return tuple(getattr(self, name) for name in self.__struct_fields__)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Envelope:
        return cls(**dict(zip(cls.__struct_fields__, row, strict=True)))

    def data(self) -> dict[str, Any]:
        """The payload as plain JSON values (no upcasting)."""
        value: dict[str, Any] = _RAW.decode(self.payload)
        return value

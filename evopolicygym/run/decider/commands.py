"""What the Run is asked to do: the Command structs, and how a refusal is said.

A ``Command`` is the Agent's request (``Submit``, ``Finish``, ``Malformed``) or one the
Host issues itself; ``decide`` answers it with events or a ``Rejection``, whose codes
are the stable ones of ``REJECTION_CODES``. ``InvalidTransition`` is what the rules
raise for an event or Host command they do not allow.
"""

from __future__ import annotations

from typing import Any

import msgspec

from evopolicygym.records.events import (
    ArtifactRef,
    EpisodeCompleted,
    EpisodeOutcome,
    Event,
    PoolEntry,
    RunCreated,
)
from evopolicygym.run.config import RunConfig
from evopolicygym.transcript import AgentIdentity, Message

__all__ = [
    "HOST_INTERRUPTED",
    "REJECTION_CODES",
    "AgentExit",
    "AssessCandidate",
    "Command",
    "CompleteAssessment",
    "CompleteEvaluation",
    "Conclude",
    "Create",
    "FailAssessment",
    "FailEvaluation",
    "FailValidation",
    "Finish",
    "Interrupt",
    "InvalidTransition",
    "Malformed",
    "RecordCandidate",
    "RecordMessages",
    "RecordReference",
    "Rejection",
    "Resume",
    "Select",
    "StartAgent",
    "StartAssessment",
    "StartValidation",
    "Submit",
    "run_created",
]

HOST_INTERRUPTED = "host_interrupted"  # AgentExited.reason when the Host died under the Agent

REJECTION_CODES: dict[str, str] = {
    "invalid_request": "the request is malformed or not possible in the Run's state",
    "episode_limit": "more Episodes than max_episodes_per_submission",
    "submission_limit": "max_submissions reached",
    "budget_exhausted": "no Episode budget left",
    "budget_allocation": "more Episodes than the budget left, "
    "or a split that leaves the budget unspendable",
    "program_invalid": "the program cannot be captured or has no policy.py",
    "candidate_limit": "more candidates than max_candidates",
    "duplicate_submission": "a Submission id named twice in finish "
    "(rules 1: also this program already evaluated on these Episodes)",
    "unknown_submission": "no published Submission with that id",
    "budget_remaining": "the Run requires the whole budget to be spent before finishing",
    "session_closed": "the Agent's authority over the Run has ended",
}


class InvalidTransition(Exception):
    """An event (or a Host command) that the Run's rules do not allow in this state."""


class Command(msgspec.Struct, frozen=True, kw_only=True):
    pass


class Create(Command, frozen=True, kw_only=True):
    """Create the Run. ``RunCreated`` records these same fields by name (``run_created``):
    a field added here is added there too (tests/test_decider_create.py checks)."""

    run_id: str
    config: RunConfig  # resolved
    benchmark_id: str
    benchmark_spec: dict[str, Any]
    environment_digest: str
    initial_program_digest: str
    agent: AgentIdentity
    seeds: dict[str, int]
    # The Episode pool, stored first as a blob (records.pools.put_pool): its manifest's
    # digest. ``pool`` inline is what Runs recorded before held; a new Run leaves it empty.
    pool_blob: str | None = None
    pool: list[PoolEntry] = []
    skill_program_digests: list[str] = []
    agent_containment: str | None = None  # as the launcher found it: "namespaces" or "none"


def run_created(command: Create) -> RunCreated:
    """The ``RunCreated`` that records ``command``: every field as given, the config as
    the plain dict the log keeps."""
    fields = msgspec.structs.asdict(command)
    fields["config"] = command.config.to_dict()
    return RunCreated(**fields)


class Submit(Command, frozen=True, kw_only=True):
    """The Agent's submit request; ``problem`` says why the program could not be captured."""

    request_id: str
    selector: str
    program_digest: str | None = None
    problem: str | None = None
    # The Submission edited from, as the Agent says (0: the initial program).
    parent: int | None = None


class Malformed(Command, frozen=True, kw_only=True):
    """A Session request that is not a submit or finish of the right shape."""

    message: str


class Finish(Command, frozen=True, kw_only=True):
    request_id: str
    candidates: list[int]


class CompleteEvaluation(Command, frozen=True, kw_only=True):
    submission_id: int
    episodes: list[EpisodeCompleted]
    score: float
    failures: int
    content: dict[str, Any] = {}
    artifacts: list[ArtifactRef] = []


class FailEvaluation(Command, frozen=True, kw_only=True):
    submission_id: int
    error: str


class StartAgent(Command, frozen=True, kw_only=True):
    command: list[str] = []
    pid: int | None = None
    tools: list[dict[str, Any]] | None = None


class RecordMessages(Command, frozen=True, kw_only=True):
    messages: list[Message]
    raw_blob: str | None = None
    source: str | None = None  # see AgentMessages.source
    tools: list[dict[str, Any]] | None = None  # see AgentMessages.tools


class AgentExit(Command, frozen=True, kw_only=True):
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    stdout_blob: str | None = None
    stderr_blob: str | None = None
    unknown_kinds: dict[str, int] = {}
    errors: int = 0
    last_error: str | None = None


class StartValidation(Command, frozen=True, kw_only=True):
    pass


class RecordCandidate(Command, frozen=True, kw_only=True):
    submission_id: int
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []


class RecordReference(Command, frozen=True, kw_only=True):
    """The initial Program's Validation result (rules 2): the reference, never selectable."""

    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []


class FailValidation(Command, frozen=True, kw_only=True):
    error: str


class Select(Command, frozen=True, kw_only=True):
    """Choose the final Submission without Validation (Validation disabled)."""


class StartAssessment(Command, frozen=True, kw_only=True):
    pass


class CompleteAssessment(Command, frozen=True, kw_only=True):
    score: float
    failures: int
    episodes: list[EpisodeOutcome] = []
    content: dict[str, Any] = {}


class FailAssessment(Command, frozen=True, kw_only=True):
    error: str


class AssessCandidate(Command, frozen=True, kw_only=True):
    """A non-selected candidate's Assessment (``assessment.candidates``); ``error`` set
    where it failed, which fails only that candidate's, never the Run."""

    submission_id: int
    score: float | None = None
    failures: int = 0
    episodes: list[EpisodeOutcome] = []
    content: dict[str, Any] = {}
    error: str | None = None


class Interrupt(Command, frozen=True, kw_only=True):
    reason: str
    last_position: int = 0


class Resume(Command, frozen=True, kw_only=True):
    pass


class Conclude(Command, frozen=True, kw_only=True):
    pass


class Rejection(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    message: str
    event: Event | None = None  # what the log keeps of a rejected Agent request

    def as_error(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}

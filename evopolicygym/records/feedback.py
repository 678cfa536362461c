"""A concluded Submission's ``feedback.json``, as the Agent's workspace holds it.

One definition for the workspace projection that writes it (``run.workspace``) and the
viewer that shows it ("Feedback as the Agent saw it"): a pure function of the Submission's
recorded events, the artifacts listed beside them and what the Run's feedback settings show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evopolicygym.records.events import (
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    SubmissionPublished,
)

__all__ = ["AGENT_FAULT_MESSAGE", "feedback_document", "feedback_episode"]

AGENT_FAULT_MESSAGE = (
    "the Host could not complete this evaluation (a fault of the Environment or the Host, "
    "not of the policy); its budget stays spent and the Run ends"
)


def feedback_episode(event: EpisodeCompleted) -> dict[str, Any]:
    # Explicit fields: trace_blob and duration_s are Host-side evidence.
    return {
        "index": event.index,
        "status": event.status,
        "total_reward": event.total_reward,
        "steps": event.steps,
        "failure": event.failure,
        "output_tail": event.output_tail,
    }


def feedback_document(
    started: EvaluationStarted,
    episodes: Sequence[EpisodeCompleted],
    outcome: SubmissionPublished | EvaluationFailed,
    artifacts: list[dict[str, Any]],
    *,
    budget: int | None,
    show_episodes: bool = True,
    show_content: bool = True,
) -> dict[str, Any]:
    """The document of a Submission that ``outcome`` concluded (``budget``: the Run's
    episode budget); a part the Run's settings withhold is left out, not emptied."""
    document: dict[str, Any] = {
        "submission_id": started.submission_id,
        "program_digest": started.program_digest,
        "parent_program_digest": started.parent_program_digest,
        "indices": list(started.indices),
        "budget_reserved": started.budget_reserved,
        "episodes": [feedback_episode(e) for e in episodes],
        "artifacts": artifacts,
    }
    if isinstance(outcome, SubmissionPublished):
        document.update(
            status="published",
            budget_used=outcome.budget_used,
            budget_left=outcome.budget_left,
            score=outcome.score,
            failures=outcome.failures,
            content=outcome.content,
            error=None,
        )
    else:
        # The reservation counted in budget_used, less any part of it not consumed.
        used = started.budget_used - started.budget_reserved + outcome.budget_consumed
        document.update(
            status="failed",
            budget_used=used,
            budget_left=None if budget is None else budget - used,
            score=None,
            failures=None,
            content=None,
            # The recorded error may quote Host-private values (an Episode seed in an
            # Environment's exception); the Agent learns only what kind of fault it was.
            error=AGENT_FAULT_MESSAGE,
        )
    # A withheld part is left out, not emptied: an Agent cannot mistake it for "none".
    if not show_episodes:
        del document["episodes"]
    if not show_content:
        del document["content"]
    return document

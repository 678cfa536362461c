"""The page of one Run: ``/runs/{run}`` (an id, a unique prefix of one, or ``latest``).

Its header says who ran what and how it stands; the parts marked live (status and budget,
the Submissions, the figures, Validation and Assessment, the Agent's attempts, the recent
timeline) follow the Run while it is recorded. The Run is read by a ``RunReader`` (a bounded
fold, caught up by the new events only), kept between requests in ``viewer.extra``.

The page's context is built in a worker thread under the reader's lock, as plain values:
rendering never reads the reader, which another request may be folding. Every recorded
text passes the viewer's redactor and the Run's private values (``clean``); the template
escapes it all.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from evopolicygym.records.events import EpisodeOutcome
from evopolicygym.records.runs import RunSummary
from evopolicygym.report.figures import (
    best_so_far_figure,
    budget_figure,
    evolution_tree_figure,
    submissions_figure,
)
from evopolicygym.report.run_data import Lineage, Outcomes
from evopolicygym.view.app import Viewer, number_param, render, resolve_stream, viewer_of
from evopolicygym.view.run_reader import Attempt, RunReader, RunReaders

__all__ = [
    "LINEAGE_RELOAD_S",
    "LINEAGE_WAIT_S",
    "ROUTES",
    "SUBMISSIONS_PAGE",
    "readers_of",
    "run_context",
]

LINEAGE_WAIT_S = 1.0  # how long a page waits for a Run's lineage before showing without it
LINEAGE_RELOAD_S = 3  # then, when no live update will bring it, the page reloads after this
SUBMISSIONS_PAGE = 100  # Submissions per page of the table (the newest page by default)
_READERS = "run_readers"  # the key of the readers in viewer.extra

Clean = Callable[[str], str]


def readers_of(viewer: Viewer) -> RunReaders:
    """The viewer's Run readers (made on first use)."""
    found = viewer.extra.get(_READERS)
    if not isinstance(found, RunReaders):
        found = viewer.extra[_READERS] = RunReaders(viewer.store)
    return found


# --------------------------------------------------------------------------- small words


def _yes_no(value: bool | None, unknown: str = "not measured") -> str:
    return unknown if value is None else ("yes" if value else "no")


def _kinds(counts: Counter[str]) -> str:
    """Episodes that did not end ``ok``, by status: ``timeout x2, error x1``."""
    bad = sorted((status, n) for status, n in counts.items() if status != "ok")
    return ", ".join(f"{status} x{n}" for status, n in bad)


def _failed(counts: Counter[str]) -> int | None:
    """Episodes so far that did not end ``ok`` (None: none has ended)."""
    return sum(n for status, n in counts.items() if status != "ok") if counts else None


def _parent(line: Lineage | None, stated: int | None) -> str:
    if line is not None and line.parent_submission_id is not None:
        parent, basis = line.parent_submission_id, line.parent_basis
    elif stated is not None:
        parent, basis = stated, "stated"
    else:
        return "-"
    told = "initial" if parent == 0 else f"#{parent}"
    return f"{told} ({basis})" if basis else told


def _outcome(name: str, outcomes: Outcomes, note: str = "") -> dict[str, Any]:
    """A Validation or Assessment row: score, failures and the Episodes' public outcomes
    (their failure text stays out: a held-out Episode's can tell what it was)."""
    episodes: list[EpisodeOutcome] = outcomes.episodes
    n = len(episodes)
    return {
        "name": name,
        "note": note,
        "score": outcomes.score,
        "failures": outcomes.failures,
        "episodes": n,
        "mean_return": sum(e.total_reward for e in episodes) / n if n else None,
        "mean_steps": sum(e.steps for e in episodes) / n if n else None,
        "kinds": _kinds(Counter(e.status for e in episodes)),
        "outcomes": [(e.index, e.status, e.total_reward, e.steps) for e in episodes],
    }


# --------------------------------------------------------------------------- parts


def _header(s: RunSummary, status: str, clean: Clean) -> dict[str, Any]:
    agent = s.agent
    return {
        "run_id": s.run_id,
        "benchmark": clean(s.benchmark_id) if s.benchmark_id else None,
        "direction": s.score_direction,
        "agent": None
        if agent is None
        else {
            "name": clean(agent.name),
            "provider": clean(agent.provider),
            "model": clean(agent.model) if agent.model else None,
        },
        "status": status,
        "success": s.success,
        "improved": _yes_no(s.improved),
        "handoff": s.handoff,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "finished_at": s.finished_at,
        "events": s.events,
        "pool_size": s.pool_size,
        "containment": clean(s.agent_containment) if s.agent_containment else None,
    }


def _status(reader: RunReader, clean: Clean) -> dict[str, Any]:
    s = reader.summary
    budget = s.episode_budget
    final = s.submissions.get(s.final_submission_id) if s.final_submission_id else None
    return {
        "budget": budget,
        "budget_used": s.budget_used,
        "budget_left": s.budget_left,
        "budget_percent": min(100.0, 100.0 * s.budget_used / budget) if budget else None,
        "started": s.started,
        "published": s.published,
        "failed": s.failed,
        "evaluating": sum(x.status == "evaluating" for x in s.submissions.values())
        if s.started
        else 0,
        "rejected_submissions": s.rejected_submissions,
        "rejected_finishes": s.rejected_finishes,
        "best_id": s.best_submission_id,
        "best_score": s.best_score,
        "best_basis": s.best_basis,
        "final_id": s.final_submission_id,
        "final_score": s.final_score,
        "final_reason": clean(s.final_reason) if s.final_reason else None,
        "final_digest": s.final_program_digest or (final.program_digest if final else None),
        "reference_score": s.reference_score,
        "assessment_score": s.assessment_score,
        "assessment_error": clean(s.assessment_error) if s.assessment_error else None,
        "validation_error": clean(s.validation_error) if s.validation_error else None,
        "terminal_reason": s.terminal_reason,
        "candidates": s.finish_candidates,
        "candidates_by": s.candidates_by,
        "agent_errors": s.agent_errors,
        "last_agent_error": clean(s.last_agent_error) if s.last_agent_error else None,
        "unknown_kinds": sorted((clean(kind), n) for kind, n in s.unknown_stream_kinds.items()),
        "undecodable": reader.undecodable,
    }


def _submission_rows(
    reader: RunReader, lineage: dict[int, Lineage], ids: list[int], clean: Clean
) -> list[dict[str, Any]]:
    s = reader.summary
    candidates = set(s.finish_candidates or ())
    rows = []
    for sid in ids:
        x, line = s.submissions[sid], lineage.get(sid)
        counts = reader.episodes.get(sid, Counter())
        marks = [
            mark
            for mark, on in (
                ("best", sid == s.best_submission_id),
                ("final", sid == s.final_submission_id),
                ("candidate", sid in candidates),
            )
            if on
        ]
        rows.append(
            {
                "id": sid,
                "parent": _parent(line, x.parent_submission_id),
                "edit": line.edit_kind if line is not None and line.edit_kind else None,
                "beats": None if line is None else line.beats_parent,
                "lineage": line is not None,
                "indices": len(x.indices),
                "episodes_done": sum(counts.values()),
                "status": x.status,
                "score": x.score,
                "failures": x.failures if x.failures is not None else _failed(counts),
                "kinds": _kinds(counts),
                "reserved": x.budget_reserved,
                "budget_used": x.budget_used,
                "validation": x.validation_score,
                "assessment": x.assessment_score,
                "error": clean(x.error) if x.error else None,
                "marks": marks,
            }
        )
    return rows


def _submissions(
    reader: RunReader, lineage: dict[int, Lineage], page: int | None, clean: Clean
) -> dict[str, Any]:
    """One page of the table (the newest when ``page`` is None)."""
    s = reader.summary
    ids = sorted(k for k, x in s.submissions.items() if x.budget_reserved is not None)
    pages = max(1, -(-len(ids) // SUBMISSIONS_PAGE))
    shown = pages if page is None else min(max(page, 1), pages)
    start = (shown - 1) * SUBMISSIONS_PAGE
    mine = ids[start : start + SUBMISSIONS_PAGE]
    return {
        "rows": _submission_rows(reader, lineage, mine, clean),
        "total": len(ids),
        "page": shown,
        "pages": pages,
        "first": start + 1,
        "last": start + len(mine),
        "lineage_missing": bool(s.published) and not lineage,
    }


def _figures(reader: RunReader, lineage: dict[int, Lineage], clean: Clean) -> list[dict[str, Any]]:
    s = reader.summary
    drawn = [
        ("tree", evolution_tree_figure(s, lineage)),
        ("best", best_so_far_figure(s, lineage)),
        ("budget", budget_figure(s)),
        ("scores", submissions_figure(s, clean)),
    ]
    return [{"key": key, "spec": spec} for key, spec in drawn if spec is not None]


def _checks(reader: RunReader) -> dict[str, Any]:
    """Validation (the reference first) and Assessment (the selected one, then the other
    candidates on the same Episodes)."""
    s = reader.summary
    validation = []
    if reader.reference is not None:
        validation.append(_outcome("initial program", reader.reference, "reference"))
    for sid in sorted(reader.validation):
        note = "selected" if sid == s.final_submission_id else ""
        validation.append(_outcome(f"#{sid}", reader.validation[sid], note) | {"id": sid})
    assessment = []
    if reader.assessment is not None:
        assessed = s.assessment_submission_id
        name = f"#{assessed}" if assessed is not None else "-"
        assessment.append(_outcome(name, reader.assessment, "selected") | {"id": assessed})
    for sid, outcome in sorted(reader.candidate_assessments.items()):
        if outcome is None:
            assessment.append(
                {"name": f"#{sid}", "id": sid, "note": "not assessed", "failed": True}
            )
        else:
            assessment.append(_outcome(f"#{sid}", outcome, "candidate") | {"id": sid})
    return {
        "validation": validation,
        "validation_split": reader.validation_split,
        "validation_episodes": reader.validation_episodes,
        "candidates_by": s.candidates_by,
        "assessment": assessment,
        "assessment_split": reader.assessment_split,
        "assessment_episodes": s.assessment_episodes,
    }


def _attempt_row(attempt: Attempt, clean: Clean) -> dict[str, Any]:
    exited = attempt.exited
    if exited is None:
        ended = None
    else:
        how = [clean(" ".join(exited.reason.split())) or "exited"]
        if exited.exit_code is not None:
            how.append(f"code {exited.exit_code}")
        if exited.signal is not None:
            how.append(f"signal {exited.signal}")
        ended = ", ".join(how)
    tokens = attempt.tokens
    return {
        "attempt": attempt.attempt,
        "started_at": attempt.started_at,
        "exited_at": attempt.exited_at,
        "ended": ended,
        "exit_code": exited.exit_code if exited is not None else None,
        "errors": exited.errors if exited is not None else attempt.errors,
        "last_error": clean(exited.last_error) if exited and exited.last_error else None,
        "messages": attempt.messages,
        "tool_calls": attempt.tool_calls,
        "tokens": {
            "input": tokens.input,
            "cached": tokens.cached,
            "output": tokens.output,
            "reasoning": tokens.reasoning,
            "reported": tokens.reported,
        },
        "tools": [clean(name) for name in attempt.tools],
        "source": clean(attempt.recorded_source) if attempt.recorded_source else None,
    }


def _recent(reader: RunReader, clean: Clean) -> dict[str, Any]:
    return {
        "rejections": [
            {
                "at": r.at,
                "request": r.request,
                "code": clean(r.code),
                "message": clean(r.message),
                "detail": clean(r.detail),
            }
            for r in reader.rejections
        ],
        "rejections_total": reader.summary.rejections,
        "timeline": [{"at": e.at, "kind": e.kind, "text": clean(e.text)} for e in reader.timeline],
        "timeline_total": reader.timeline_total,
    }


def run_context(viewer: Viewer, run: str, page: int | None = None) -> dict[str, Any]:
    """The page's values for ``run`` (as a user names it): the Run caught up, read under
    its reader's lock. ``HTTPException(404)`` for a Run not in the store."""
    stream_id = resolve_stream(viewer, run)
    reader = readers_of(viewer).get(stream_id)
    with reader.lock:
        reader.catch_up()
        s = reader.summary
        private, redact = reader.private, viewer.redact

        def clean(text: str) -> str:
            return private.scrub(redact(text))

        status = s.status
        if status == "running":  # the log cannot tell a Host that died: the index can
            row = viewer.index.get(s.run_id)
            if row is not None and row.status == "interrupted":
                status = "interrupted"
        lineage, pending = reader.lineage(LINEAGE_WAIT_S)
        config = s.public_config()
        return {
            "rid": quote(s.run_id, safe=""),  # the Run's id in a link's path
            "run": _header(s, status, clean),
            "state": _status(reader, clean),
            "submissions": _submissions(reader, lineage, page, clean),
            "figures": _figures(reader, lineage, clean),
            "lineage_pending": pending,
            # The lineage of a Run no longer recorded comes with no live update: reload.
            "reload_s": LINEAGE_RELOAD_S
            if pending and (status != "running" or not lineage)
            else None,
            "checks": _checks(reader),
            "attempts": [_attempt_row(a, clean) for _, a in sorted(reader.attempts.items())],
            "recent": _recent(reader, clean),
            "config": None
            if config is None
            else clean(json.dumps(config, indent=2, sort_keys=True, default=str)),
        }


async def run_page(request: Request) -> Response:
    viewer = viewer_of(request)
    page = number_param(request, "page", None, 1)
    context = await run_in_threadpool(run_context, viewer, request.path_params["run"], page)
    return render(
        request,
        "run.html",
        needs_plots=True,  # a Run still recorded may draw its first figure on a live update
        live_run=context["run"]["run_id"],
        **context,
    )


ROUTES: list[BaseRoute] = [Route("/runs/{run}", run_page, name="run")]

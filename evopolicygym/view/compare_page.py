"""Two Runs side by side: their facts, best so far over the budget, outcomes, final programs
diffed.

``/compare?a=RUN&b=RUN`` (each a Run id, ``run-<id>``, ``latest`` or a unique prefix, as the
CLI takes them). With only ``a``, a form offers the 50 most recent Runs of its Benchmark (from
the Run index); with neither, a form takes two ids. A Run the store does not hold is a 404.
Runs of different Benchmarks may be compared; the page says their scores are not comparable.

A side's program is its final one (the selected Submission's), else its initial one. The diff
is ``report.diffs.program_diff`` of the two, redacted, shown as text lines marked added,
deleted or header: nothing recorded becomes markup. What a comparison computed is kept under
the two Runs' stream versions (``PageMemo``), so an open page is computed again only when one
of its Runs moved.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.runs import (
    RunSummary,
    program_of,
    run_id_of,
    run_stream_id,
)
from evopolicygym.report.diffs import diff_lines, program_diff
from evopolicygym.report.html import fmt
from evopolicygym.view.app import Viewer, render, resolve_stream, viewer_of
from evopolicygym.view.experiments_page import PageMemo, redact_spec
from evopolicygym.view.run_page import LINEAGE_WAIT_S, readers_of
from evopolicygym.view.templating import when

__all__ = ["CHOICES", "ROUTES"]

CHOICES = 50  # Runs offered to compare a Run with


def _resolve(viewer: Viewer, given: str) -> str:
    """The Run id ``given`` names; a 404 saying why when there is none (or several)."""
    return run_id_of(resolve_stream(viewer, given)) or given


# --------------------------------------------------------------------------- choosing b


def choices(viewer: Viewer, run_id: str) -> dict[str, Any]:
    """The form to choose a Run to compare ``run_id`` with: the latest of its Benchmark."""
    redact = viewer.redact
    row = viewer.index.get(run_id)
    offered: list[tuple[str, str]] = []
    if row is not None and row.benchmark:
        page = viewer.index.page({"benchmark": row.benchmark}, size=CHOICES + 1)
        for other in page.rows:
            if other.run_id == run_id or len(offered) >= CHOICES:
                continue
            text = " · ".join(
                [
                    other.run_id,
                    when(other.created_at),
                    other.agent or "-",
                    other.model or "-",
                    other.status,
                    f"score {fmt(other.score)}",
                ]
            )
            offered.append((other.run_id, redact(text)))
    return {
        "a": run_id,
        "shown_a": redact(run_id),
        "benchmark": redact(row.benchmark) if row is not None and row.benchmark else None,
        "offered": offered,
    }


# --------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Side:
    """One Run of the comparison."""

    run_id: str
    summary: RunSummary
    status: str
    lineage: dict[int, Any]
    program_label: str  # "final #N" or "initial" (or why there is none)
    files: dict[str, bytes] | None


def _program(viewer: Viewer, summary: RunSummary) -> tuple[str, dict[str, bytes] | None]:
    """The Run's final program, else its initial one: its label and files."""
    try:
        digest, which = program_of(summary, "final")
        label = f"final, Submission #{which}"
    except LookupError:
        try:
            digest, which = program_of(summary, "initial")
            label = "initial (no final Program)"
        except LookupError:
            return "none recorded", None
    try:
        return label, dict(viewer.store.blobs.get_program(digest).files)
    except (BlobError, KeyError, OSError) as exc:
        return f"{label}: cannot be read ({type(exc).__name__})", None


def _side(viewer: Viewer, run_id: str) -> Side:
    """One Run of the two, from the Run readers the Run page keeps (one fold and one lineage
    per Run, whichever page asks); its summary copied, as the reader goes on folding."""
    reader = readers_of(viewer).get(run_stream_id(run_id))
    with reader.lock:
        reader.catch_up()
        lineage, _pending = reader.lineage(LINEAGE_WAIT_S)
        summary = copy.deepcopy(reader.summary)
    row = viewer.index.get(run_id)
    label, files = _program(viewer, summary)
    return Side(
        run_id=run_id,
        summary=summary,
        status=row.status if row is not None else summary.status,
        lineage=lineage,
        program_label=label,
        files=files,
    )


def _score(summary: RunSummary) -> float | None:
    if summary.assessment_score is not None:
        return summary.assessment_score
    return summary.terminal_assessment_score


def _facts(side: Side, redact: Callable[[str], str]) -> list[tuple[str, str]]:
    """A Run's facts as (label, text), the rows of the table (texts redacted)."""
    s = side.summary
    agent = s.agent
    final = s.final_submission_id
    budget = s.episode_budget
    return [
        ("Benchmark", redact(s.benchmark_id or "-")),
        ("direction", s.score_direction),
        (
            "agent",
            redact(f"{agent.name} ({agent.provider})" if agent is not None else "-"),
        ),
        ("model", redact((agent.model if agent is not None else None) or "-")),
        ("created", when(s.created_at)),
        ("status", redact(side.status)),
        ("handoff", redact(s.handoff) if s.created else "-"),
        ("improved", fmt(s.improved)),
        ("success", fmt(s.success) if s.finished else "-"),
        ("final Submission", "-" if final is None else f"#{final}"),
        ("final (validation) score", fmt(s.final_score)),
        ("initial program's validation score", fmt(s.reference_score)),
        ("assessment score", fmt(_score(s))),
        ("best published score", fmt(s.best_score)),
        ("budget used", f"{s.budget_used}/{fmt(budget)}"),
        ("Submissions", f"{s.started} ({s.published} published, {s.failed} failed)"),
        ("rejected requests", str(s.rejections)),
        ("events", str(s.events)),
    ]


def _outcomes(side: Side, redact: Callable[[str], str]) -> list[tuple[str, str]]:
    """How the Run ended and why, as (label, text)."""
    s = side.summary
    return [
        ("ended", redact(s.terminal_reason or "not yet")),
        ("finished at", when(s.finished_at)),
        ("candidates", ", ".join(f"#{c}" for c in s.finish_candidates or []) or "-"),
        ("candidates named by", redact(s.candidates_by or s.handoff) if s.created else "-"),
        ("why this final", redact(s.final_reason or "-")),
        ("Agent attempts", f"{s.agent_attempts} ({s.agent_errors} errors)"),
        ("last Agent error", redact(s.last_agent_error or "-")),
        ("validation error", redact(s.validation_error or "-")),
        ("assessment error", redact(s.assessment_error or "-")),
    ]


def _paired(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(label, x, y) for (label, x), (_same, y) in zip(a, b, strict=True)]


def comparison(viewer: Viewer, run_a: str, run_b: str) -> dict[str, Any]:
    """The context of the comparison of two Runs (ids as the store holds them)."""
    from evopolicygym.report.figures import compare_figure

    redact = viewer.redact
    a, b = _side(viewer, run_a), _side(viewer, run_b)
    figure = compare_figure(
        [(f"a: {run_a}", a.summary, a.lineage), (f"b: {run_b}", b.summary, b.lineage)]
    )
    if a.files is not None and b.files is not None:
        lines = diff_lines(program_diff(a.files, b.files, "a", "b"), redact)
        why_no_diff = None if lines else "The two programs are the same."
    else:
        lines, why_no_diff = [], "A program cannot be read, so there is no diff."
    benchmarks = (a.summary.benchmark_id, b.summary.benchmark_id)
    return {
        "a": run_a,
        "b": run_b,
        "shown_a": redact(run_a),
        "shown_b": redact(run_b),
        "comparable": benchmarks[0] == benchmarks[1],
        "benchmarks": [redact(x or "-") for x in benchmarks],
        "facts": _paired(_facts(a, redact), _facts(b, redact)),
        "outcomes": _paired(_outcomes(a, redact), _outcomes(b, redact)),
        "figure": None if figure is None else redact_spec(figure, redact),
        "programs": [redact(a.program_label), redact(b.program_label)],
        "diff": lines,
        "why_no_diff": why_no_diff,
    }


def _version(viewer: Viewer, run_id: str) -> int | None:
    row = viewer.index.get(run_id)
    return None if row is None else row.version


def cached_comparison(viewer: Viewer, given_a: str, given_b: str) -> dict[str, Any]:
    """``comparison`` of the two Runs named, kept while neither moves."""
    run_a, run_b = _resolve(viewer, given_a), _resolve(viewer, given_b)
    va, vb = _version(viewer, run_a), _version(viewer, run_b)
    version = None if va is None or vb is None else (va, vb)
    found: dict[str, Any] = PageMemo.of(viewer, "compare").get(
        (run_a, run_b), version, lambda: comparison(viewer, run_a, run_b)
    )
    return found


def _chosen(viewer: Viewer, given: str) -> dict[str, Any]:
    return choices(viewer, _resolve(viewer, given))


async def compare(request: Request) -> Response:
    viewer = viewer_of(request)
    q = request.query_params
    a, b = q.get("a", "").strip(), q.get("b", "").strip()
    if not a:
        a, b = b, ""  # only b given: it is the Run to start from
    if not a:
        return render(request, "compare.html", mode="ask")
    await run_in_threadpool(viewer.index.refresh)
    if not b:
        context = await run_in_threadpool(_chosen, viewer, a)
        return render(request, "compare.html", mode="choose", **context)
    context = await run_in_threadpool(cached_comparison, viewer, a, b)
    return render(request, "compare.html", mode="compare", needs_plots=True, **context)


ROUTES: list[BaseRoute] = [Route("/compare", compare, name="compare")]

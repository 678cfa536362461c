"""The page of one Run: its facts, timeline, Submissions, best-so-far, diffs, transcript,
Validation and Assessment."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable

from evopolicygym.program import Program
from evopolicygym.records.events import EpisodeOutcome
from evopolicygym.records.location import Store
from evopolicygym.records.runs import RunSummary, SubmissionSummary
from evopolicygym.report.diffs import diff_markup, program_diff
from evopolicygym.report.figures import (
    best_so_far_figure,
    submissions_figure,
    timeline_figure,
)
from evopolicygym.report.html import Markup, Section, esc, fmt, table
from evopolicygym.report.plots import spec_markup
from evopolicygym.report.run_data import Lineage, Outcomes, RunData
from evopolicygym.report.videos import videos_markup
from evopolicygym.transcript import Message

__all__ = ["MESSAGE_LIMIT", "run_sections"]

MESSAGE_LIMIT = 20_000  # characters of one message's text kept in the page
_TIMELINE_OPEN = 60  # a longer timeline table starts folded

Redact = Callable[[str], str]


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _yes_no(value: bool | None) -> str:
    return "not measured" if value is None else ("yes" if value else "no")


def _facts(pairs: list[tuple[str, str]]) -> str:
    return (
        '<dl class="facts">'
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs)
        + "</dl>"
    )


# --------------------------------------------------------------------------- overview


def _overview(data: RunData, status: str) -> str:
    s = data.summary
    agent = s.agent
    who = (
        "-"
        if agent is None
        else f"{agent.name} ({agent.provider}{', ' + agent.model if agent.model else ''})"
    )
    budget = s.episode_budget
    duration = (
        f"{(s.finished_at - s.created_at) / 1e9:.1f} s"
        if s.finished_at is not None and s.created_at is not None
        else "-"
    )
    best = (
        "-"
        if s.best_submission_id is None
        else f"#{s.best_submission_id}: {fmt(s.best_score)} ({s.best_basis})"
    )
    final = (
        "-" if s.final_submission_id is None else f"#{s.final_submission_id}: {fmt(s.final_score)}"
    )
    pairs = [
        ("Benchmark", f"{s.benchmark_id or '-'} ({s.score_direction})"),
        ("Agent", who),
        ("Status", status),
        ("Terminal reason", s.terminal_reason or "not ended"),
        ("Handoff", s.handoff),
        ("Improved", _yes_no(s.improved)),
        ("Success", "yes" if s.success else "no"),
        ("Budget", f"{s.budget_used} of {budget if budget is not None else '?'} Episodes used"),
        ("Episode pool", fmt(s.pool_size)),
        (
            "Submissions",
            f"{s.started} evaluated, {s.published} published, {s.failed} failed, "
            f"{s.rejections} refused",
        ),
        ("Best published (train)", best),
        ("Final (validation)", final),
        ("Initial program (validation)", fmt(s.reference_score)),
        ("Assessment (held out)", fmt(s.assessment_score)),
        ("Agent attempts", str(s.agent_attempts)),
        ("Agent containment", s.agent_containment or "-"),
        ("Created", _when(s.created_at)),
        ("Finished", _when(s.finished_at)),
        ("Duration", duration),
        ("Events", str(s.events)),
    ]
    config = s.public_config()
    shown = (
        "<details><summary>Run config (public)</summary>"
        f"<pre>{esc(json.dumps(config, indent=2, sort_keys=True))}</pre></details>"
        if config is not None
        else ""
    )
    bad = (
        f'<p class="bad">{data.undecodable} events do not decode (see record verify).</p>'
        if data.undecodable
        else ""
    )
    return _facts(pairs) + shown + bad


# --------------------------------------------------------------------------- timeline


def _timeline(data: RunData, redact: Redact) -> str:
    events = data.timeline
    spec = timeline_figure(events, redact)
    if spec is None:
        return '<p class="muted">No events.</p>'
    plot = spec_markup("plot-timeline", spec)
    start = events[0].at
    rows = [(f"{(e.at - start) / 1e9:.2f}", e.kind, redact(e.text)) for e in events]
    listing = table(["s", "event", "what"], rows, cls="timeline")
    opened = " open" if len(rows) <= _TIMELINE_OPEN else ""
    return f"{plot}<details{opened}><summary>{len(rows)} events</summary>{listing}</details>"


# --------------------------------------------------------------------------- Submissions


def _parent(line: Lineage | None) -> str:
    if line is None or line.parent_submission_id is None:
        return "-"
    parent = "initial" if line.parent_submission_id == 0 else f"#{line.parent_submission_id}"
    return f"{parent} ({line.parent_basis})" if line.parent_basis else parent


def _edit(line: Lineage | None) -> str:
    if line is None or line.edit_kind is None:
        return "-"
    beats = {True: "yes", False: "no", None: "not comparable"}[line.beats_parent]
    return f"{line.edit_kind} ({beats})"


def _submissions(data: RunData, redact: Redact) -> str:
    s = data.summary
    spec = submissions_figure(s, redact)
    if spec is None:
        return '<p class="muted">No Submission was evaluated.</p>'
    subs = [s.submissions[k] for k in sorted(s.submissions)]
    evaluated = [x for x in subs if x.budget_reserved is not None]
    return spec_markup("plot-submissions", spec) + _submissions_table(data, evaluated, redact)


def _submissions_table(data: RunData, subs: list[SubmissionSummary], redact: Redact) -> str:
    rows = []
    for x in subs:
        episodes = data.episodes.get(x.submission_id, [])
        kinds = Counter(e.status for e in episodes if e.status != "ok")
        rows.append(
            (
                f"#{x.submission_id}",
                _parent(data.lineage.get(x.submission_id)),
                _edit(data.lineage.get(x.submission_id)),
                len(x.indices),
                x.status,
                x.score,
                x.failures,
                ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or "-",
                x.budget_used,
                x.validation_score,
                redact(x.error) if x.error else None,
            )
        )
    return table(
        [
            "Submission",
            "parent",
            "edit (beats the parent?)",
            "Episodes",
            "status",
            "score",
            "failures",
            "failure kinds",
            "budget used",
            "validation",
            "error",
        ],
        rows,
    )


def _best_so_far(data: RunData) -> str:
    s = data.summary
    spec = best_so_far_figure(s, data.lineage)
    if spec is None and s.published and not data.lineage:
        return (
            '<p class="bad">A program of this Run cannot be read, so neither can its lineage '
            "(see record verify).</p>"
        )
    if spec is None:
        return '<p class="muted">No published Submission.</p>'
    note = {
        "matched": (
            "Every Submission was scored on the same Episodes: the best is a matched comparison."
        ),
        "unmatched": (
            "Submissions were scored on different Episodes: an unmatched best is a reference "
            "point, not a comparison."
        ),
        "single": "One Submission: nothing to compare yet.",
    }.get(s.best_basis or "", "")
    return spec_markup("plot-best", spec) + f'<p class="note">{esc(note)}</p>'


# --------------------------------------------------------------------------- diffs


def _diffs(data: RunData, store: Store, redact: Redact) -> str:
    """Each Submission against its parent: the one the Agent named, else the nearest earlier
    program (``submissions_df``'s parent, the rule the exports use)."""
    s = data.summary
    programs: dict[str, Program | None] = {}

    def program(digest: str | None) -> Program | None:
        if digest is None:
            return None
        if digest not in programs:
            try:
                programs[digest] = store.blobs.get_program(digest)
            except Exception:  # a missing or corrupt blob: `record verify` says which
                programs[digest] = None
        return programs[digest]

    digests = {0: s.initial_program_digest}
    digests.update({sid: sub.program_digest for sid, sub in s.submissions.items()})
    options, blocks = [], []
    for sid in sorted(s.submissions):
        sub, line = s.submissions[sid], data.lineage.get(sid)
        if sub.program_digest is None or sub.budget_reserved is None:
            continue
        parent = line.parent_submission_id if line is not None else None
        label = "none" if parent is None else "initial" if parent == 0 else f"#{parent}"
        kind = line.edit_kind if line is not None and line.edit_kind else "?"
        before, after = (
            program(digests.get(parent) if parent is not None else None),
            program(sub.program_digest),
        )
        if before is None or after is None:
            body = esc(
                "[no parent program to compare with]"
                if parent is None
                else "[a program blob is missing]"
            )
        else:
            diff = program_diff(dict(before.files), dict(after.files), label.lstrip("#"), str(sid))
            body = diff_markup(diff, redact) if diff else esc("(the same program as its parent)")
        options.append(
            f'<option value="{sid}">#{sid} vs its parent {esc(label)} ({esc(kind)})</option>'
        )
        blocks.append(f'<pre class="diff" data-diff="{sid}">{body}</pre>')
    if not options:
        return '<p class="muted">No Submission to compare.</p>'
    return (
        '<label>Submission: <select id="diff-select" data-diffs="diff-box">'
        + "".join(options)
        + '</select></label> <span class="note">the parent: the one the Agent named, else the '
        "nearest earlier program; the kind of edit in brackets</span>"
        + '<div id="diff-box">'
        + "".join(blocks)
        + "</div>"
    )


# --------------------------------------------------------------------------- transcript


def _clip(text: str) -> str:
    if len(text) <= MESSAGE_LIMIT:
        return text
    return (
        text[:MESSAGE_LIMIT] + f"\n[… {len(text) - MESSAGE_LIMIT:,} more characters in the record]"
    )


def _message(message: Message, redact: Redact) -> str:
    parts = [f'<div class="msg {esc(message.role)}"><span class="role">{esc(message.role)}</span>']
    if message.name:
        parts.append(f' <span class="muted">{esc(message.name)}</span>')
    if message.tool_call_id:
        parts.append(f' <span class="muted">result of call {esc(message.tool_call_id)}</span>')
    if message.model:
        parts.append(f' <span class="muted">{esc(message.model)}</span>')
    if message.error is not None:
        status = f" {message.error.status}" if message.error.status is not None else ""
        parts.append(f' <span class="bad">{esc(message.error.kind + status)}</span>')
    if message.reasoning:
        parts.append(
            f"<details><summary>reasoning ({len(message.reasoning):,} characters)</summary>"
            f"<pre>{esc(_clip(redact(message.reasoning)))}</pre></details>"
        )
    if message.content:
        parts.append(f"<pre>{esc(_clip(redact(message.content)))}</pre>")
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments, indent=2, sort_keys=True, ensure_ascii=False)
        parts.append(
            f'<div class="call">→ <b>{esc(call.name)}</b> '
            f'<span class="muted">call {esc(call.id)}</span>'
            f"<pre>{esc(_clip(redact(arguments)))}</pre></div>"
        )
    if message.usage is not None:
        u = message.usage
        parts.append(
            f'<div class="usage">tokens: {u.input_tokens:,} in ({u.cached_tokens:,} cached), '
            f"{u.output_tokens:,} out ({u.reasoning_tokens:,} reasoning)</div>"
        )
    parts.append("</div>")
    return "".join(parts)


def _transcript(data: RunData, redact: Redact) -> str:
    if not any(data.transcripts.values()):
        return '<p class="muted">No transcript was recorded.</p>'
    out = []
    for attempt in sorted(data.transcripts):
        messages = data.transcripts[attempt]
        usage = [m.usage for m in messages if m.usage is not None]
        totals = (
            f"{sum(u.input_tokens for u in usage):,} input and "
            f"{sum(u.output_tokens for u in usage):,} output tokens"
            if usage
            else "no usage reported"
        )
        exit_ = data.exits.get(attempt)
        ended = (
            "; exited "
            + (str(exit_.exit_code) if exit_.exit_code is not None else f"by signal {exit_.signal}")
            + f"{' (' + exit_.reason + ')' if exit_.reason else ''}"
            if exit_ is not None
            else ""
        )
        tools = data.tools.get(attempt)
        offered = f"; tools offered: {', '.join(tools)}" if tools else ""
        calls = sum(len(m.tool_calls) for m in messages)
        out.append(
            f'<h3>Attempt {attempt}</h3><p class="note">{len(messages)} messages, '
            f"{calls} tool calls, "
            f"{esc(totals)}{esc(ended)}{esc(offered)}</p>"
        )
        out.extend(_message(m, redact) for m in messages)
    return "".join(out)


# --------------------------------------------------------------------------- Validation, Assessment


def _outcome_cells(outcomes: Outcomes) -> tuple[object, ...]:
    episodes: list[EpisodeOutcome] = outcomes.episodes
    n = len(episodes)
    kinds = Counter(e.status for e in episodes if e.status != "ok")
    return (
        outcomes.score,
        outcomes.failures,
        n,
        sum(e.total_reward for e in episodes) / n if n else None,
        sum(e.steps for e in episodes) / n if n else None,
        ", ".join(f"{k} x{c}" for k, c in sorted(kinds.items())) or "-",
    )


_OUTCOME_HEADERS = ["score", "failures", "Episodes", "mean return", "mean steps", "failure kinds"]


def _validation(data: RunData, redact: Redact) -> str:
    s = data.summary
    parts = []
    if data.validation or data.reference is not None:
        rows: list[tuple[object, ...]] = []
        if data.reference is not None:
            rows.append(("initial program (reference)", "-", *_outcome_cells(data.reference)))
        for sid in sorted(data.validation):
            chosen = Markup('<b class="good">selected</b>') if sid == s.final_submission_id else ""
            rows.append((f"#{sid}", chosen, *_outcome_cells(data.validation[sid])))
        where = (
            f"{data.validation_episodes} {data.validation_split} Episodes per candidate, "
            "the same for each"
            if data.validation_episodes is not None
            else ""
        )
        parts.append(f'<h3>Validation</h3><p class="note">{esc(where)}</p>')
        parts.append(table(["candidate", "", *_OUTCOME_HEADERS], rows))
    elif s.validation_error:
        parts.append(
            f'<h3>Validation</h3><p class="bad">failed: {esc(redact(s.validation_error))}</p>'
        )
    else:
        parts.append('<h3>Validation</h3><p class="muted">No Validation was recorded.</p>')
    if data.assessment is not None:
        assessed = s.assessment_submission_id
        split = data.assessment_split or "-"
        if not data.candidate_assessments:
            rows = [
                (
                    f"#{assessed}" if assessed is not None else "-",
                    split,
                    *_outcome_cells(data.assessment),
                )
            ]
            parts.append("<h3>Assessment</h3>")
            parts.append(table(["Submission", "split", *_OUTCOME_HEADERS], rows))
        else:  # the other candidates on the same Episodes: measured, never selecting
            rows = [
                (
                    f"#{assessed}",
                    Markup('<b class="good">selected</b>'),
                    split,
                    *_outcome_cells(data.assessment),
                )
            ]
            for sid, outcome in sorted(data.candidate_assessments.items()):
                cells = (
                    _outcome_cells(outcome)
                    if outcome is not None
                    else ("failed", "-", "-", "-", "-", "-")
                )
                rows.append((f"#{sid}", "candidate", split, *cells))
            parts.append(
                '<h3>Assessment</h3><p class="note">Every validated candidate on the same held-out '
                "Episodes; the selection and the Run's assessment score are the selected one's.</p>"
            )
            parts.append(table(["Submission", "", "split", *_OUTCOME_HEADERS], rows))
    elif s.assessment_error:
        parts.append(
            f'<h3>Assessment</h3><p class="bad">failed: {esc(redact(s.assessment_error))}</p>'
        )
    else:
        parts.append('<h3>Assessment</h3><p class="muted">No Assessment was recorded.</p>')
    parts.append(
        '<p class="note">Public outcomes only: Episode seeds and specs stay with the Host.</p>'
    )
    return "".join(parts)


def run_sections(
    data: RunData, store: Store, redact: Redact, status: str | None = None
) -> list[Section]:
    """The sections of one Run's page. ``status``: the Run's status as the caller tells it
    (the CLI knows whether a Host still holds a running Run); else the summary's."""
    summary: RunSummary = data.summary

    shown = redact

    def clean(text: str) -> str:
        return data.private.scrub(shown(text))

    redact = clean
    return [
        Section("overview", "Overview", _overview(data, status or summary.status)),
        Section("timeline", "Timeline", _timeline(data, redact)),
        Section("submissions", "Submissions", _submissions(data, redact)),
        Section("best", "Best so far", _best_so_far(data)),
        Section("diffs", "Diffs", _diffs(data, store, redact)),
        Section("videos", "Videos", videos_markup(data.videos, summary.best_submission_id, store)),
        Section("transcript", "Transcript", _transcript(data, redact)),
        Section("validation", "Validation and Assessment", _validation(data, redact)),
    ]

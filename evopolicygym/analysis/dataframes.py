"""pandas DataFrames over a store's Runs, in the style of Inspect AI's dataframes.

Each function takes a store (a ``Store``, a store path, or None for the default store,
as ``--store`` and ``EVOPOLICY_STORE`` resolve it) and optionally ``run_ids=`` (Run ids,
``<id>`` or ``run-<id>``) and ``experiment="<id>"`` (that experiment's Runs, every
attempt of every cell; ``current`` marks the one standing for its cell). Rows come in
stream order (an experiment's: matrix order). Every Run is read once from its stream with
the Run read API (``records.runs``: ``RunSummary``, ``better``); Runs still running are
included with what they have so far.

What stays out, as in the exports: the Episode pool (EpisodeSpecs, scenarios), every
seed the Host derives and the Run's own seed, Validation and Assessment Episodes (only
their scores appear: the selected Program's Validation and Assessment scores, each
candidate's Validation score and, where the Run assessed its candidates, each one's
Assessment score) and the text of Validation and Assessment failures;
recorded text that can quote a private value (an evaluation error, a reason) is scrubbed
of the Run's seeds and scenarios. ``seed`` and ``agent_seed`` with ``experiment=`` are
the experiment spec's repeat labels, which the spec already states.

Columns (dtype; ``Int64``/``boolean``/``string`` are pandas' nullable dtypes, missing is
``<NA>``; missing floats are NaN; times are ``datetime64[ns, UTC]``):

``runs_df``: one row per Run.

| column | dtype | meaning |
| --- | --- | --- |
| run_id | string | the Run's id |
| benchmark_id | string | the registry id of its Benchmark |
| benchmark | string | the experiment's Benchmark label, else the Benchmark id |
| agent | string | the experiment's agent label, else the agent's name |
| agent_name | string | the agent as recorded |
| agent_provider | string | reference, codex, chat, command, … |
| agent_model | string | the model, where one was named |
| score_direction | string | maximize or minimize |
| status | string | running, interrupted, or the terminal reason |
| terminal_reason | string | finished, agent_exited, budget_exhausted, …; NA while running |
| handoff | string | who named the candidates: agent, host or none |
| improved | boolean | the selected Program beat the initial one on the same Validation Episodes |
| success | boolean | finished, handed off by the Agent, and improved |
| budget_total | Int64 | the episode budget |
| budget_used | Int64 | Episodes reserved by Submissions |
| budget_share | float64 | budget_used / budget_total |
| submissions | Int64 | evaluations started |
| published | Int64 | Submissions published |
| failed | Int64 | Submissions whose evaluation failed |
| rejected | Int64 | submit and finish requests refused before evaluation |
| episodes | Int64 | Episodes completed by Submissions |
| failed_episodes | Int64 | of those, Episodes the Policy failed |
| best_score | float64 | the best published score in the Benchmark's direction |
| best_basis | string | single, matched (every Submission on the same indices) or unmatched |
| best_submission_id | Int64 | the Submission with best_score |
| final_submission_id | Int64 | the selected Submission |
| validation_score | float64 | the selected Program's Validation score |
| reference_score | float64 | the initial Program's Validation score |
| assessment_score | float64 | the selected Program's held-out Assessment score |
| assessment_failures | Int64 | failed Assessment Episodes |
| assessment_episodes | Int64 | Assessment Episodes |
| agent_attempts | Int64 | Agent attempts started |
| agent_errors | Int64 | error records of the Agent's CLI |
| created_at | datetime64[ns, UTC] | when the Run was created |
| finished_at | datetime64[ns, UTC] | when it ended |
| experiment_id | string | the experiment (NA without ``experiment=``) |
| cell_id | string | ``<agent>/<benchmark>/seed=<s>/agent_seed=<a>`` |
| seed | Int64 | the cell's seed repeat |
| agent_seed | Int64 | the cell's agent seed repeat |
| attempt | Int64 | the cell's attempt this Run is (1-based) |
| current | boolean | the attempt that stands for the cell |

``submissions_df``: one row per Submission whose evaluation started.

| column | dtype | meaning |
| --- | --- | --- |
| run_id | string | |
| submission_id | Int64 | |
| benchmark_id | string | |
| score_direction | string | |
| status | string | evaluating, published or failed |
| published | boolean | status is published |
| failed | boolean | status is failed |
| program_digest | string | the Program submitted |
| parent_submission_id | Int64 | the parent (0: the initial program) |
| parent_basis | string | stated (the Agent named it) or nearest (the smallest diff) |
| parent_distance | Int64 | lines added plus removed from the parent |
| edit_kind | string | none, cosmetic, parametric or synthesis (vs the parent) |
| indices | object | the pool indices (a list of int) |
| episodes | Int64 | how many indices |
| episodes_used | Int64 | Episodes charged to it (a failed evaluation: what it consumed) |
| cumulative_episodes | Int64 | the Run's Episodes used after it |
| score | float64 | the published train score |
| failures | Int64 | failed Episodes |
| matched_episodes | Int64 | indices it shares with its parent |
| matched_score | float64 | its score on those |
| parent_matched_score | float64 | the parent's score on those |
| beats_parent | boolean | better than the parent on matched indices; NA where not comparable |
| best_so_far | boolean | better than every earlier published score |
| best_so_far_score | float64 | the best published score up to it |
| best_so_far_basis | string | first, matched (all so far on the same indices) or unmatched |
| best_so_far_matched | boolean | beats every earlier one it shares indices with, on those |
| candidate | boolean | the Agent (or Host) named it a Validation candidate |
| validation_score | float64 | its Validation score (candidates only) |
| validation_failures | Int64 | failed Validation Episodes |
| selected | boolean | the Host selected it |
| assessment_score | float64 | its Assessment score: the selected one's (and see below) |
| error | string | why its evaluation failed (scrubbed) |
| started_at | datetime64[ns, UTC] | |
| published_at | datetime64[ns, UTC] | |

With ``assessment.candidates``, ``assessment_score`` is every other validated candidate's
too, on the same Episodes (NaN where that one failed).

``episodes_df``: one row per completed Episode of a Submission (never Validation or
Assessment Episodes).

| column | dtype | meaning |
| --- | --- | --- |
| run_id | string | |
| submission_id | Int64 | |
| pool_index | Int64 | the index the Agent chose (its EpisodeSpec stays private) |
| status | string | ok, or the Policy failure (exception, timeout, invalid_action, …) |
| failure | string | the failure's detail |
| total_reward | float64 | the Episode's return |
| steps | Int64 | |
| score | float64 | what it counted for: total_reward, the failure score if it failed |
| duration_s | float64 | |
| recorded_at | datetime64[ns, UTC] | |

``messages_df``: one row per normalized transcript message, as the exports take the
transcript (an attempt the CLI's own session record holds is read from it), and the
error records of the Agent's CLI as role ``error`` (after the conversation where the
session record replaced the live stream).

| column | dtype | meaning |
| --- | --- | --- |
| run_id | string | |
| attempt | Int64 | the Agent attempt |
| turn | Int64 | the message's place in the attempt's transcript (from 0) |
| role | string | system, user, assistant, tool or error |
| content | string | |
| reasoning | string | the provider's visible reasoning |
| tool_calls | object | a list of {id, name, arguments} |
| tool_call_id | string | on tool messages: the call answered |
| name | string | on tool messages: the tool |
| model | string | the model that wrote an assistant message |
| input_tokens | Int64 | usage of the model response, where reported |
| output_tokens | Int64 | |
| cached_tokens | Int64 | |
| cache_write_tokens | Int64 | |
| reasoning_tokens | Int64 | |
| error_kind | string | an error record's kind |
| at | datetime64[ns, UTC] | when the Host received it |

``events_df``: one row per event, flat scalar columns, the rows of the ``events``
export: an unselected candidate's ``CandidateValidated`` and every ``CandidateAssessed``
(an unselected candidate's held-out Assessment) are left out, no payload.

| column | dtype | meaning |
| --- | --- | --- |
| position | Int64 | global log position |
| run_id | string | |
| stream_version | Int64 | |
| event_id | string | |
| type | string | the event type |
| schema_version | Int64 | |
| recorded_at | datetime64[ns, UTC] | |
| submission_id | Int64 | where the payload has one |
| index | Int64 | a pool index |
| attempt | Int64 | an Agent attempt |
| score | float64 | |
| failures | Int64 | |
| status | string | |
| total_reward | float64 | |
| steps | Int64 | |
| budget_used | Int64 | |
| budget_left | Int64 | |
| code | string | a rejection's code |
| reason | string | a terminal or rejection reason (scrubbed) |
| program_digest | string | |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from evopolicygym.analysis.reading import (
    RunRecord,
    StoreLike,
    lineage,
    programs_of,
    read_run,
    selected_runs,
)

__all__ = [
    "EPISODES_COLUMNS",
    "EVENTS_COLUMNS",
    "MESSAGES_COLUMNS",
    "RUNS_COLUMNS",
    "SUBMISSIONS_COLUMNS",
    "episodes_df",
    "events_df",
    "messages_df",
    "runs_df",
    "submissions_df",
]

_UTC = "datetime64[ns, UTC]"


def _columns(spec: str) -> dict[str, str]:
    return dict(item.split(":") for item in spec.split())


RUNS_COLUMNS = _columns(
    "run_id:string benchmark_id:string benchmark:string agent:string agent_name:string "
    "agent_provider:string agent_model:string score_direction:string status:string "
    "terminal_reason:string handoff:string improved:boolean success:boolean budget_total:Int64 "
    "budget_used:Int64 budget_share:float64 submissions:Int64 published:Int64 failed:Int64 "
    "rejected:Int64 episodes:Int64 failed_episodes:Int64 best_score:float64 best_basis:string "
    "best_submission_id:Int64 final_submission_id:Int64 validation_score:float64 "
    "reference_score:float64 assessment_score:float64 assessment_failures:Int64 "
    "assessment_episodes:Int64 agent_attempts:Int64 agent_errors:Int64 created_at:utc "
    "finished_at:utc experiment_id:string cell_id:string seed:Int64 agent_seed:Int64 attempt:Int64 "
    "current:boolean"
)
SUBMISSIONS_COLUMNS = _columns(
    "run_id:string submission_id:Int64 benchmark_id:string score_direction:string status:string "
    "published:boolean failed:boolean program_digest:string parent_submission_id:Int64 "
    "parent_basis:string parent_distance:Int64 edit_kind:string indices:object episodes:Int64 "
    "episodes_used:Int64 cumulative_episodes:Int64 score:float64 failures:Int64 "
    "matched_episodes:Int64 matched_score:float64 parent_matched_score:float64 "
    "beats_parent:boolean best_so_far:boolean best_so_far_score:float64 best_so_far_basis:string "
    "best_so_far_matched:boolean candidate:boolean validation_score:float64 "
    "validation_failures:Int64 selected:boolean assessment_score:float64 error:string "
    "started_at:utc published_at:utc"
)
EPISODES_COLUMNS = _columns(
    "run_id:string submission_id:Int64 pool_index:Int64 status:string failure:string "
    "total_reward:float64 steps:Int64 score:float64 duration_s:float64 recorded_at:utc"
)
MESSAGES_COLUMNS = _columns(
    "run_id:string attempt:Int64 turn:Int64 role:string content:string reasoning:string "
    "tool_calls:object tool_call_id:string name:string model:string input_tokens:Int64 "
    "output_tokens:Int64 cached_tokens:Int64 cache_write_tokens:Int64 reasoning_tokens:Int64 "
    "error_kind:string at:utc"
)
EVENTS_COLUMNS = _columns(
    "position:Int64 run_id:string stream_version:Int64 event_id:string type:string "
    "schema_version:Int64 recorded_at:utc submission_id:Int64 index:Int64 attempt:Int64 "
    "score:float64 failures:Int64 status:string total_reward:float64 steps:Int64 "
    "budget_used:Int64 budget_left:Int64 code:string reason:string program_digest:string"
)


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pd.DataFrame:
    """``rows`` as a frame with exactly ``columns`` and their dtypes (an empty one too)."""
    data: dict[str, Any] = {}
    for name, kind in columns.items():
        values = [row.get(name) for row in rows]
        if kind == "utc":
            data[name] = pd.to_datetime(pd.array(values, dtype="Int64"), unit="ns", utc=True)
        elif kind == "object":
            series = pd.Series(values, dtype=object)
            data[name] = series
        elif kind == "float64":
            data[name] = pd.array(
                [float("nan") if v is None else v for v in values], dtype="float64"
            )
        else:
            data[name] = pd.array(values, dtype=kind)
    frame = pd.DataFrame(data, columns=list(columns))
    for name, kind in columns.items():  # an empty frame keeps its documented dtypes
        if kind == "utc" and str(frame[name].dtype) != _UTC:
            frame[name] = frame[name].astype(_UTC)
    return frame


def _records(
    store: StoreLike,
    run_ids: Sequence[str] | None,
    experiment: str | None,
    build: Callable[[Any, RunRecord], list[dict[str, Any]]],
    *,
    messages: bool = False,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with selected_runs(store, run_ids, experiment) as (opened, streams):
        context = programs_of(opened)
        for stream_id, cell in streams:
            rows.extend(build(context, read_run(opened, stream_id, cell, messages=messages)))
    return rows


# --------------------------------------------------------------------------- runs


def _run_row(record: RunRecord) -> dict[str, Any]:
    s = record.summary
    agent = s.agent
    budget = s.episode_budget
    episodes = [e for found in record.episodes.values() for e in found]
    cell = record.cell
    return {
        "run_id": s.run_id,
        "benchmark_id": s.benchmark_id,
        "benchmark": cell.benchmark if cell is not None else s.benchmark_id,
        "agent": cell.agent if cell is not None else (agent.name if agent is not None else None),
        "agent_name": agent.name if agent is not None else None,
        "agent_provider": agent.provider if agent is not None else None,
        "agent_model": agent.model if agent is not None else None,
        "score_direction": s.score_direction,
        "status": s.status,
        "terminal_reason": s.terminal_reason,
        "handoff": s.handoff,
        "improved": s.improved,
        "success": s.success,
        "budget_total": budget,
        "budget_used": s.budget_used,
        "budget_share": s.budget_used / budget if budget else None,
        "submissions": s.started,
        "published": s.published,
        "failed": s.failed,
        "rejected": s.rejections,
        "episodes": len(episodes),
        "failed_episodes": sum(e.status != "ok" for e in episodes),
        "best_score": s.best_score,
        "best_basis": s.best_basis,
        "best_submission_id": s.best_submission_id,
        "final_submission_id": s.final_submission_id,
        "validation_score": s.final_score,
        "reference_score": s.reference_score,
        "assessment_score": s.assessment_score,
        "assessment_failures": s.assessment_failures,
        "assessment_episodes": s.assessment_episodes,
        "agent_attempts": s.agent_attempts,
        "agent_errors": s.agent_errors,
        "created_at": s.created_at,
        "finished_at": s.finished_at,
        "experiment_id": cell.experiment_id if cell is not None else None,
        "cell_id": cell.cell_id if cell is not None else None,
        "seed": cell.seed if cell is not None else None,
        "agent_seed": cell.agent_seed if cell is not None else None,
        "attempt": cell.attempt if cell is not None else None,
        "current": cell.current if cell is not None else None,
    }


def runs_df(
    store: StoreLike = None, *, run_ids: Sequence[str] | None = None, experiment: str | None = None
) -> pd.DataFrame:
    """One row per Run (see the module's table)."""
    return _frame(_records(store, run_ids, experiment, lambda _, r: [_run_row(r)]), RUNS_COLUMNS)


# --------------------------------------------------------------------------- submissions


def _submission_rows(programs: Any, record: RunRecord) -> list[dict[str, Any]]:
    s = record.summary
    edits = lineage(record, programs)
    candidates = set(s.finish_candidates or ())
    rows = []
    for sub in record.started:
        edit = edits.get(sub.submission_id)
        used = sub.budget_reserved
        if sub.status == "failed" and sub.budget_consumed is not None:
            used = sub.budget_consumed
        rows.append(
            {
                "run_id": s.run_id,
                "submission_id": sub.submission_id,
                "benchmark_id": s.benchmark_id,
                "score_direction": s.score_direction,
                "status": sub.status,
                "published": sub.status == "published",
                "failed": sub.status == "failed",
                "program_digest": sub.program_digest,
                "parent_submission_id": edit.parent_submission_id if edit else None,
                "parent_basis": edit.parent_basis if edit else None,
                "parent_distance": edit.parent_distance if edit else None,
                "edit_kind": edit.edit_kind if edit else None,
                "indices": list(sub.indices),
                "episodes": len(sub.indices),
                "episodes_used": used,
                "cumulative_episodes": sub.budget_used,
                "score": sub.score if sub.status == "published" else None,
                "failures": sub.failures
                if sub.status == "published"
                else sum(e.status != "ok" for e in record.episodes.get(sub.submission_id, [])),
                "matched_episodes": len(edit.matched_indices) if edit else None,
                "matched_score": edit.matched_score if edit else None,
                "parent_matched_score": edit.parent_matched_score if edit else None,
                "beats_parent": edit.beats_parent if edit else None,
                "best_so_far": edit.best_so_far if edit else None,
                "best_so_far_score": edit.best_so_far_score if edit else None,
                "best_so_far_basis": edit.best_so_far_basis if edit else None,
                "best_so_far_matched": edit.best_so_far_matched if edit else None,
                # Candidates: the Agent's accepted finish, or the Host's nomination (they
                # were validated); a candidate the Host could not validate is still one.
                "candidate": sub.submission_id in candidates or sub.validation_score is not None,
                "validation_score": sub.validation_score,
                "validation_failures": sub.validation_failures,
                "selected": s.final_submission_id == sub.submission_id,
                "assessment_score": sub.assessment_score,
                "error": None if sub.error is None else record.private.scrub(sub.error),
                "started_at": sub.started_at,
                "published_at": sub.published_at,
            }
        )
    return rows


def submissions_df(
    store: StoreLike = None, *, run_ids: Sequence[str] | None = None, experiment: str | None = None
) -> pd.DataFrame:
    """One row per Submission whose evaluation started (see the module's table)."""
    return _frame(_records(store, run_ids, experiment, _submission_rows), SUBMISSIONS_COLUMNS)


# --------------------------------------------------------------------------- episodes


def _episode_rows(_: Any, record: RunRecord) -> list[dict[str, Any]]:
    floor = record.failure_score
    maximize = record.direction != "minimize"
    rows = []
    for submission_id in sorted(record.episodes):
        times = record.episode_times[submission_id]
        for e, at in zip(record.episodes[submission_id], times, strict=True):
            # What the Episode counted for, as Feedback scores it: a failure scores the
            # Benchmark's failure score, which no completed Episode falls below.
            reward = float(e.total_reward)
            score: float | None = reward
            if e.status != "ok":
                score = floor
            elif floor is not None:
                score = max(reward, floor) if maximize else min(reward, floor)
            rows.append(
                {
                    "run_id": record.run_id,
                    "submission_id": submission_id,
                    "pool_index": e.index,
                    "status": e.status,
                    "failure": None if e.failure is None else record.private.scrub(e.failure),
                    "total_reward": e.total_reward,
                    "steps": e.steps,
                    "score": score,
                    "duration_s": e.duration_s,
                    "recorded_at": at,
                }
            )
    return rows


def episodes_df(
    store: StoreLike = None, *, run_ids: Sequence[str] | None = None, experiment: str | None = None
) -> pd.DataFrame:
    """One row per completed Episode of a Submission (see the module's table)."""
    return _frame(_records(store, run_ids, experiment, _episode_rows), EPISODES_COLUMNS)


# --------------------------------------------------------------------------- messages


def _message_rows(_: Any, record: RunRecord) -> list[dict[str, Any]]:
    rows = []
    for attempt, messages in record.transcripts.items():
        for turn, m in enumerate(messages):
            usage = m.usage
            rows.append(
                {
                    "run_id": record.run_id,
                    "attempt": attempt,
                    "turn": turn,
                    "role": m.role,
                    "content": m.content,
                    "reasoning": m.reasoning,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                        for c in m.tool_calls
                    ],
                    "tool_call_id": m.tool_call_id,
                    "name": m.name,
                    "model": m.model,
                    "input_tokens": usage.input_tokens if usage is not None else None,
                    "output_tokens": usage.output_tokens if usage is not None else None,
                    "cached_tokens": usage.cached_tokens if usage is not None else None,
                    "cache_write_tokens": usage.cache_write_tokens if usage is not None else None,
                    "reasoning_tokens": usage.reasoning_tokens if usage is not None else None,
                    "error_kind": m.error.kind if m.error is not None else None,
                    "at": m.at or None,
                }
            )
    return rows


def messages_df(
    store: StoreLike = None, *, run_ids: Sequence[str] | None = None, experiment: str | None = None
) -> pd.DataFrame:
    """One row per transcript message (see the module's table)."""
    return _frame(
        _records(store, run_ids, experiment, _message_rows, messages=True), MESSAGES_COLUMNS
    )


# --------------------------------------------------------------------------- events

_EVENT_SCALARS = {
    name: kind
    for name, kind in EVENTS_COLUMNS.items()
    if name
    not in (
        "position",
        "run_id",
        "stream_version",
        "event_id",
        "type",
        "schema_version",
        "recorded_at",
    )
}


def _scalar(value: Any, kind: str) -> Any:
    """``value`` if it has the column's type (a field of another shape is left out)."""
    if isinstance(value, bool):
        return None
    if kind == "Int64":
        return value if isinstance(value, int) else None
    if kind == "float64":
        return float(value) if isinstance(value, int | float) else None
    return value if isinstance(value, str) else None


def events_df(
    store: StoreLike = None, *, run_ids: Sequence[str] | None = None, experiment: str | None = None
) -> pd.DataFrame:
    """One row per event of the Runs, flat scalar columns (see the module's table)."""
    rows: list[dict[str, Any]] = []
    with selected_runs(store, run_ids, experiment) as (opened, streams):
        for stream_id, cell in streams:
            record = read_run(opened, stream_id, cell)
            selected = record.summary.final_submission_id
            for envelope in opened.events.read_stream(stream_id, 0):
                payload = envelope.data()
                if not isinstance(payload, dict):
                    payload = {}
                if (
                    envelope.type == "CandidateValidated"
                    and payload.get("submission_id") != selected
                ):
                    continue  # a candidate not selected: the events export leaves it out too
                if envelope.type == "CandidateAssessed":
                    # Always a candidate not selected (the selected one's is AssessmentCompleted).
                    continue
                row: dict[str, Any] = {
                    "position": envelope.position,
                    "run_id": record.run_id,
                    "stream_version": envelope.stream_version,
                    "event_id": envelope.event_id,
                    "type": envelope.type,
                    "schema_version": envelope.schema_version,
                    "recorded_at": envelope.recorded_at,
                }
                for name, kind in _EVENT_SCALARS.items():
                    value = _scalar(payload.get(name), kind)
                    row[name] = record.private.scrub(value) if isinstance(value, str) else value
                rows.append(row)
    return _frame(rows, EVENTS_COLUMNS)

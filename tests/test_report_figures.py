"""The report's figures as specs (``report.figures``): JSON data the static report and the live
viewer both draw, told from a recorded Run's summary and lineage, with recorded text kept as
text (escaped for plotly's label markup) and redacted."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import RunSummary, run_stream_id, summarize
from evopolicygym.redaction import Redactor
from evopolicygym.report.curves import best_so_far
from evopolicygym.report.figures import (
    EDIT_COLORS,
    best_so_far_figure,
    budget_figure,
    compare_figure,
    evolution_tree_figure,
    experiment_figures,
    plain_label,
    submissions_figure,
    timeline_figure,
)
from evopolicygym.report.plots import PALETTE, figure, figure_spec, spec_markup
from evopolicygym.report.run_data import Lineage, lineage_of, read_run
from evopolicygym.transcript import AgentIdentity
from tests.support.runlogs import files, synth_run, write_run

SECRET = "sk-proj-Zx9Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"  # an OpenAI key, by its shape
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


def _recorded(store: Store, run_id: str = "alpha") -> tuple[RunSummary, dict[int, Lineage]]:
    """``synth_run``: 1 and 2 on the same indices, 3 on others, 4 failed, 5 structural from 1
    (named by the Agent), 6 a comment added to 5."""
    write_run(store, synth_run(run_id))
    return summarize(store.events, run_stream_id(run_id)), lineage_of(store, run_id)


def _prefix(store: Store, run_id: str, events: int) -> RunSummary:
    """The Run as a viewer sees it while it is recorded: its first ``events`` events."""
    summary = RunSummary(run_id=run_id, stream_id=run_stream_id(run_id))
    for envelope in store.events.read_stream(run_stream_id(run_id), 0):
        if envelope.stream_version > events:
            break
        summary.apply(envelope.event(), version=envelope.stream_version, at=envelope.recorded_at)
    return summary


def _json(spec: dict[str, Any]) -> Any:
    return json.loads(json.dumps(spec, allow_nan=False))


def _trace(spec: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [t for t in spec["data"] if t["name"] == name]
    return found


def test_a_spec_is_json_data_with_the_shared_look() -> None:
    spec = figure_spec(
        [
            {
                "x": [1, math.nan, math.inf],
                "y": np.array([1.0, np.nan, 3.0]),
                "z": [np.int64(2), np.float32(1.5), np.bool_(True), pd.NA, None],
            }
        ],
        {"xaxis": {"title": {"text": "t"}}, "showlegend": False},
        height=200,
    )
    assert _json(spec) == spec
    assert spec["data"] == [
        {"x": [1, None, None], "y": [1.0, None, 3.0], "z": [2, 1.5, True, None, None]}
    ]
    layout = spec["layout"]
    assert layout["height"] == 200 and layout["showlegend"] is False
    # An axis given keeps the look's grid; one not given is the look's.
    assert layout["xaxis"] == {"gridcolor": "#e5e8ee", "zeroline": False, "title": {"text": "t"}}
    assert layout["yaxis"] == {"gridcolor": "#e5e8ee", "zeroline": False}
    assert spec["config"] == {"responsive": True, "displaylogo": False}
    # The report's markup is the spec's: the same call draws it.
    assert figure(
        "p", spec["data"], {"xaxis": {"title": {"text": "t"}}, "showlegend": False}, height=200
    ) == spec_markup("p", spec)


def test_every_figure_of_a_run_is_json_data(store: Store) -> None:
    summary, lineage = _recorded(store)
    timeline = read_run(store, run_stream_id("alpha")).timeline
    specs = [
        submissions_figure(summary, Redactor().text),
        best_so_far_figure(summary, lineage),
        budget_figure(summary),
        evolution_tree_figure(summary, lineage),
        compare_figure([("alpha", summary, lineage)]),
        timeline_figure(timeline, Redactor().text),
    ]
    for spec in specs:
        assert spec is not None and set(spec) == {"data", "layout", "config"}
        assert _json(spec) == spec


def test_the_evolution_tree_has_a_node_per_program_and_an_edge_per_parent(store: Store) -> None:
    summary, lineage = _recorded(store)
    spec = evolution_tree_figure(summary, lineage)
    assert spec is not None
    published = sorted(k for k, s in summary.submissions.items() if s.status == "published")
    assert published == [1, 2, 3, 5, 6]
    initial = _trace(spec, "initial program")
    assert initial["x"] == [0] and initial["y"] == [summary.reference_score] == [1.0]
    # One node per published Submission, at its score, in its edit kind's colour.
    kinds = [t for t in spec["data"] if t["name"] in EDIT_COLORS]
    nodes = sorted(x for t in kinds for x in t["x"])
    assert nodes == published
    for trace in kinds:
        assert trace["marker"]["color"] == EDIT_COLORS[trace["name"]]
        for sid, y in zip(trace["x"], trace["y"], strict=True):
            line = lineage[sid]
            assert line.edit_kind == trace["name"] and y == summary.submissions[sid].score
    # The failed one: an x at the lowest score (the initial program's 1.0 or any lower).
    failed = _trace(spec, "evaluation failed")
    floor = min(s.score for s in summary.submissions.values() if s.score is not None)
    assert failed["x"] == [4] and failed["y"] == [min(floor, 1.0)]
    assert failed["marker"]["symbol"] == "x"
    # Edges: one per Submission, from the parent its lineage names (0: the initial program).
    edges = _trace(spec, "parent to Submission")
    xs = edges["x"]
    pairs = [(xs[i], xs[i + 1]) for i in range(0, len(xs), 3)]
    assert all(x is None for x in xs[2::3])
    assert pairs == [(lineage[sid].parent_submission_id, sid) for sid in sorted(lineage)]
    assert (1, 5) in pairs and (0, 1) in pairs  # 5 names 1; 1 starts from the initial program
    # The hover tells the Submission, its score, its edit and its parent with the basis.
    text = dict(zip(_trace(spec, "synthesis")["x"], _trace(spec, "synthesis")["text"], strict=True))
    assert text[5] == "#5 · 0 · synthesis · parent #1 (stated)"
    assert "#1 · 2 · parametric · parent initial (nearest)" in _trace(spec, "parametric")["text"]


def test_the_budget_figure_climbs_to_the_runs_budget_used(store: Store) -> None:
    summary, _lineage = _recorded(store)
    spec = budget_figure(summary)
    assert spec is not None
    used = _trace(spec, "Episodes used")
    assert used["x"] == [0, 1, 2, 3, 4, 5, 6]
    assert used["y"][0] == 0 and used["y"][-1] == summary.budget_used == 14
    assert used["y"] == sorted(used["y"])  # reserved budget is never refunded
    assert used["line"]["shape"] == "hv"
    assert used["text"][4] == "#4 (failed): 1 Episode" and used["text"][1].startswith("#1 ")
    line = _trace(spec, "episode budget")
    assert line["y"] == [summary.episode_budget] * 2 == [8, 8]
    assert line["x"] == [0, 6] and line["line"]["dash"] == "dash"


def test_a_hostile_error_is_redacted_and_shown_as_text(store: Store) -> None:
    summary, _lineage = _recorded(store)
    failed = summary.submissions[4]
    summary.submissions[4] = dataclasses.replace(failed, error=f"{HOSTILE} key {SECRET} & more")
    spec = submissions_figure(summary, Redactor().text)
    assert spec is not None
    shown = _trace(spec, "evaluation failed")
    assert shown["x"] == [4]
    assert shown["text"] == ["&lt;img src=x onerror=alert(1)&gt; key [REDACTED] &amp; more"]
    dumped = json.dumps(spec)
    assert "<img" not in dumped and SECRET not in dumped
    assert plain_label("<b>a</b> & b") == "&lt;b&gt;a&lt;/b&gt; &amp; b"


def test_best_so_far_follows_the_lineage(store: Store) -> None:
    summary, lineage = _recorded(store)
    spec = best_so_far_figure(summary, lineage)
    assert spec is not None
    line = _trace(spec, "best so far")
    published = [sid for sid in sorted(lineage) if summary.submissions[sid].status == "published"]
    assert line["y"] == [lineage[sid].best_so_far_score for sid in published]
    assert line["x"] == [summary.submissions[sid].budget_used for sid in published]
    unmatched = _trace(spec, "Submission, unmatched (other Episodes)")
    assert unmatched["text"][0].startswith("#3 (unmatched")


def test_compare_draws_one_best_so_far_line_per_run(store: Store) -> None:
    alpha = _recorded(store, "alpha")
    beta = _recorded(store, "beta")
    fresh = _prefix(store, "alpha", 1)  # created, no Submission yet
    assert fresh.created and not fresh.submissions
    spec = compare_figure([("alpha", *alpha), ("<i>beta</i>", *beta), ("fresh", fresh, {})])
    assert spec is not None
    assert [t["name"] for t in spec["data"]] == ["alpha", "&lt;i&gt;beta&lt;/i&gt;"]
    for i, (trace, (summary, lineage)) in enumerate(zip(spec["data"], [alpha, beta], strict=True)):
        points = best_so_far(summary, lineage)
        assert trace["line"]["color"] == PALETTE[i]
        assert trace["y"] == [p.best for p in points] + [points[-1].best]
        assert trace["x"][-1] == summary.budget_used  # held to the budget used
    assert compare_figure([("fresh", fresh, {})]) is None
    assert compare_figure([]) is None


def test_a_run_without_submissions_has_nothing_to_draw(store: Store) -> None:
    write_run(store, synth_run("alpha"))
    fresh = _prefix(store, "alpha", 1)
    assert submissions_figure(fresh, Redactor().text) is None
    assert best_so_far_figure(fresh, {}) is None
    assert budget_figure(fresh) is None
    assert evolution_tree_figure(fresh, {}) is None
    assert timeline_figure([], Redactor().text) is None


def test_a_run_being_recorded_draws_what_it_has(store: Store) -> None:
    """Midway: the first Submission evaluated and published, no lineage read yet."""
    write_run(store, synth_run("alpha"))
    full = summarize(store.events, run_stream_id("alpha"))
    versions = [
        e.stream_version
        for e in store.events.read_stream(run_stream_id("alpha"), 0)
        if e.event().type_name() == "EvaluationStarted"
    ]
    live = _prefix(store, "alpha", versions[1])  # #2 just reserved its budget
    assert live.submissions[2].status == "evaluating"
    tree = evolution_tree_figure(live, {})
    assert tree is not None
    assert _trace(tree, "being evaluated")["x"] == [2]
    assert _trace(tree, "edit unknown")["x"] == [1]
    budget = budget_figure(live)
    assert budget is not None
    assert _trace(budget, "Episodes used")["y"][-1] == live.budget_used < full.budget_used


def test_the_experiment_figures_are_the_pages(store: Store) -> None:
    from evopolicygym.analysis import runs_df, submissions_df
    from evopolicygym.report import runs_report

    for i in range(4):
        run = synth_run(f"r{i}")
        run.benchmark_id = ("toy-counter", "cartpole")[i % 2]
        run.assessment_score = 10.0 + i
        if i >= 2:
            run.agent = AgentIdentity(name="<b>chat</b>", provider="chat", model="m")
        write_run(store, run)
    drawn = experiment_figures(runs_df(store), submissions_df(store))
    names = [name for name, _spec in drawn]
    assert names == [
        "plot-leaderboard",
        "plot-best-0",
        "plot-best-1",
        "plot-selection",
        "plot-edits",
    ]
    for _name, spec in drawn:
        assert _json(spec) == spec
    leaderboard = dict(drawn)["plot-leaderboard"]
    assert {t["name"] for t in leaderboard["data"]} == {"&lt;b&gt;chat&lt;/b&gt;", "reference"}
    assert "<b>chat" not in json.dumps([spec for _name, spec in drawn])
    html = runs_report(store).html
    assert [n for n in names if f'data-figure="{n}"' in html] == names


def test_a_failed_submission_is_a_node_at_the_floor_with_its_parent(store: Store) -> None:
    """1 fails, 2 is published: the tree holds the initial program, both, and their edges."""
    run = synth_run("solo")
    failed, published = run.submissions[3], run.submissions[0]
    run.submissions = [dataclasses.replace(failed, files=files(2.0)), published]
    run.candidates = [2]
    write_run(store, run)
    summary = summarize(store.events, run_stream_id("solo"))
    lineage = lineage_of(store, "solo")
    spec = evolution_tree_figure(summary, lineage)
    assert spec is not None
    kind = lineage[2].edit_kind
    assert [t["name"] for t in spec["data"]] == [
        "parent to Submission",
        "initial program",
        kind,
        "evaluation failed",
    ]
    score = summary.submissions[2].score
    assert score is not None and summary.reference_score is not None
    assert _trace(spec, "evaluation failed")["y"] == [min(score, summary.reference_score)]
    xs = _trace(spec, "parent to Submission")["x"]
    assert [(xs[i], xs[i + 1]) for i in range(0, len(xs), 3)] == [
        (lineage[1].parent_submission_id, 1),
        (lineage[2].parent_submission_id, 2),
    ]
    best = best_so_far_figure(summary, lineage)
    assert best is not None and _trace(best, "best so far")["y"] == [score]

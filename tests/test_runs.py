"""The Run read API (records.runs): one fold of what happened in a Run, one comparison of
scores, and every reader of a Run agreeing with them."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evopolicygym.records.location import Store, open_store
from evopolicygym.records.read_models import open_read_models, refresh
from evopolicygym.records.runs import (
    RUN_PREFIX,
    RunSummary,
    UnknownRun,
    better,
    overview,
    program_of,
    resolve_run,
    run_id_of,
    run_stream_id,
    summarize,
)
from evopolicygym.run.decider import rank_candidates
from evopolicygym.run.replay import replay_run
from evopolicygym_exporters import RunFilter, read_histories
from tests.support.runlogs import Planned, SynthRun, policy_source, write_run

# --------------------------------------------------------------------------- better


def test_better_follows_the_direction() -> None:
    assert better(2.0, 1.0, "maximize") and not better(1.0, 2.0, "maximize")
    assert better(1.0, 2.0, "minimize") and not better(2.0, 1.0, "minimize")


def test_better_keeps_the_earlier_of_equals_and_never_takes_nan() -> None:
    assert not better(1.0, 1.0, "maximize") and not better(1.0, 1.0, "minimize")
    assert better(-5.0, None, "maximize")  # any score beats none
    assert not better(None, 1.0, "maximize") and not better(None, None, "minimize")
    assert not better(math.nan, None, "maximize") and not better(math.nan, 1.0, "minimize")
    assert better(1.0, math.nan, "maximize")  # a NaN best is replaced by any score


finite = st.floats(allow_nan=False, allow_infinity=False, width=32)


@given(a=finite, b=finite, direction=st.sampled_from(["maximize", "minimize"]))
def test_better_is_a_strict_order(a: float, b: float, direction: str) -> None:
    # Exactly one of: a beats b, b beats a, they are equal.
    assert [better(a, b, direction), better(b, a, direction), a == b].count(True) == 1


@given(
    results=st.lists(st.tuples(finite, st.integers(0, 3)), max_size=8),
    direction=st.sampled_from(["maximize", "minimize"]),
)
def test_validation_ranks_with_the_same_comparison(
    results: list[tuple[float, int]], direction: str
) -> None:
    """rank_candidates (the decider's Validation order) is better(), then fewer failures,
    then the order given: no candidate ranked later beats one ranked earlier."""
    entries = [(i + 1, score, failures) for i, (score, failures) in enumerate(results)]
    ranked = rank_candidates(entries, direction)
    assert sorted(ranked) == [sid for sid, _, _ in entries]
    by_id = {sid: (score, failures) for sid, score, failures in entries}
    for earlier, later in itertools.pairwise(ranked):
        (s1, f1), (s2, f2) = by_id[earlier], by_id[later]
        assert not better(s2, s1, direction)
        if s1 == s2:
            assert (f1, earlier) < (f2, later)


# --------------------------------------------------------------------------- stream ids


def test_stream_ids() -> None:
    assert run_stream_id("abc") == f"{RUN_PREFIX}abc" and run_id_of("run-abc") == "abc"
    assert run_id_of("experiment-1") is None


def test_resolve_run_takes_the_id_or_the_stream(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        write_run(
            store,
            SynthRun("alpha", [Planned({"policy.py": policy_source(1.0)}, [0, 1], [1.0, 2.0])]),
        )
        assert (
            resolve_run(store.events, "alpha")
            == resolve_run(store.events, "run-alpha")
            == "run-alpha"
        )
        with pytest.raises(UnknownRun, match="no run 'beta'"):
            resolve_run(store.events, "beta")


# --------------------------------------------------------------------------- the summary


def _files(gain: float) -> dict[str, str]:
    return {"policy.py": policy_source(gain)}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(tmp_path / "store", create=True)


def test_a_summary_of_a_finished_run(store: Store) -> None:
    run = SynthRun(
        "alpha",
        [
            Planned(_files(1.0), [0, 1], [1.0, 3.0]),  # 2.0
            Planned(_files(2.0), [0, 1], None),  # the evaluation failed
            Planned(_files(3.0), [2, 3], [4.0, 4.0]),  # 4.0: the best
            Planned(_files(4.0), [0, 1], [4.0, 4.0]),  # 4.0 again: the earlier stays best
        ],
        candidates=[3, 1],
        assessment_score=3.5,
    )
    write_run(store, run)
    summary = summarize(store.events, "run-alpha")
    assert (summary.run_id, summary.benchmark_id, summary.status) == (
        "alpha",
        "toy-counter",
        "finished",
    )
    assert (summary.started, summary.published, summary.failed) == (4, 3, 1)
    assert (summary.best_submission_id, summary.best_score) == (3, 4.0)
    assert summary.first_published is not None and summary.first_published.score == 2.0
    assert summary.submissions[2].status == "failed" and summary.submissions[2].score is None
    assert summary.submissions[1].episodes == 2 and summary.submissions[3].indices == [2, 3]
    assert summary.finish_candidates == [3, 1] and summary.final_submission_id == 3
    assert summary.assessment_score == 3.5
    assert (summary.handoff, summary.reference_score, summary.improved) == ("agent", 1.0, True)
    assert summary.success
    assert (summary.budget_used, summary.episode_budget) == (8, 8)
    assert summary.public_config() is not None and "seed" not in summary.public_config()  # type: ignore[operator]
    assert program_of(summary, "initial")[1] == "initial"
    assert program_of(summary, "final") == (summary.submissions[3].program_digest, 3)
    assert program_of(summary, 4)[0] == summary.submissions[4].program_digest
    with pytest.raises(LookupError, match=r"has no submission 9 \(it has 1 to 4\)"):
        program_of(summary, 9)


@pytest.mark.parametrize(
    ("reference", "reason", "handoff", "improved", "success"),
    [
        (1.0, "finished", "agent", True, True),
        (2.0, "finished", "agent", False, False),  # the final program did not beat the initial
        (1.5, "finished", "agent", False, False),  # a tie is no improvement
        (None, "finished", "agent", None, False),  # rules 1: never measured, never a success
    ],
)
def test_success_is_finished_handed_off_and_improved(
    store: Store,
    reference: float | None,
    reason: str,
    handoff: str,
    improved: bool | None,
    success: bool,
) -> None:
    write_run(store, SynthRun("r", [Planned(_files(1.0), [0], [1.0])], reference_score=reference))
    summary = summarize(store.events, "run-r")
    assert (summary.terminal_reason, summary.handoff, summary.improved, summary.success) == (
        reason,
        handoff,
        improved,
        success,
    )
    refresh(store)
    with open_read_models(store, read_only=True) as db:
        row = db.execute("SELECT handoff, improved, success, reference_score FROM runs").fetchone()
    assert row == (handoff, improved, success, reference)


def test_the_best_says_whether_it_rests_on_matched_evidence(store: Store) -> None:
    write_run(store, SynthRun("same", [Planned(_files(g), [0, 1], [g, g]) for g in (1.0, 2.0)]))
    write_run(
        store,
        SynthRun(
            "apart",
            [Planned(_files(1.0), [0, 1], [1.0, 1.0]), Planned(_files(2.0), [2, 3], [2.0, 2.0])],
        ),
    )
    assert summarize(store.events, "run-same").best_basis == "matched"
    assert summarize(store.events, "run-same").published_indices == [0, 1]
    assert summarize(store.events, "run-apart").best_basis == "unmatched"
    replay = replay_run(store, "apart")
    marks = [
        (e.best_so_far, e.best_so_far_basis) for e in replay.timeline if hasattr(e, "best_so_far")
    ]
    assert marks == [(True, "single"), (True, "unmatched")]


def test_a_minimizing_run_keeps_the_lowest_score(store: Store) -> None:
    run = SynthRun(
        "low",
        [Planned(_files(g), [0], [r]) for g, r in [(1.0, 5.0), (2.0, -3.0), (3.0, -1.0)]],
        direction="minimize",
    )
    write_run(store, run)
    summary = summarize(store.events, "run-low")
    assert (summary.best_submission_id, summary.best_score) == (2, -3.0)


def test_overview_reads_only_the_ends(store: Store) -> None:
    write_run(store, SynthRun("alpha", [Planned(_files(1.0), [0], [1.0])]))
    (info,) = store.events.streams(RUN_PREFIX)
    head = overview(store.events, info)
    assert (head.benchmark_id, head.status, head.events) == (
        "toy-counter",
        "finished",
        info.version,
    )
    assert head.terminal_assessment_score == 42.0
    assert head.started == 0  # the middle of the stream was not read


def test_an_unfinished_or_interrupted_run(store: Store) -> None:
    summary = RunSummary(run_id="x", stream_id="run-x")
    assert summary.status == "empty" and not summary.created and not summary.success
    with pytest.raises(LookupError, match="no RunCreated"):
        program_of(summary, "initial")
    with pytest.raises(LookupError, match="no final submission"):
        program_of(summary, "final")


# --------------------------------------------------------------------------- every reader agrees


# Each Submission: its Episodes' rewards (few values, so scores tie), or None (it failed).
runs = st.lists(
    st.lists(st.sampled_from([0.0, 1.0, 2.5, -1.0]), min_size=1, max_size=3) | st.none(),
    min_size=1,
    max_size=6,
)


@pytest.mark.slow
@given(plans=runs, direction=st.sampled_from(["maximize", "minimize"]))
def test_every_reader_of_a_run_agrees_with_its_summary(
    tmp_path_factory: pytest.TempPathFactory, plans: list[list[float] | None], direction: str
) -> None:
    """The runs read model, the exporters' histories and replay's totals are the one fold:
    the same counts, budget and best published Submission, with ties and failures."""
    root = tmp_path_factory.mktemp("agree")
    submissions = [
        Planned(_files(float(k)), list(range(len(rewards or [0]))), rewards)
        for k, rewards in enumerate(plans)
    ]
    published = [i + 1 for i, rewards in enumerate(plans) if rewards is not None]
    candidates = published[:1] or [1]
    with open_store(root / "store", create=True) as store:
        write_run(store, SynthRun("r", submissions, direction=direction, candidates=candidates))
        summary = summarize(store.events, "run-r")
        # The best published Submission, by brute force: the better score, the earlier of equals.
        scores = {i + 1: sum(r) / len(r) for i, r in enumerate(plans) if r is not None}
        expected = None
        for sid, score in scores.items():
            if expected is None or better(score, scores[expected], direction):
                expected = sid
        assert summary.best_submission_id == expected
        assert (summary.started, summary.published) == (len(plans), len(scores))

        refresh(store)
        with open_read_models(store, read_only=True) as db:
            row = db.execute(
                "SELECT submissions, published, failed, budget_used, best_score, "
                "best_submission_id, final_submission_id, status, best_basis "
                "FROM runs WHERE run_id = 'r'"
            ).fetchone()
        assert row == (
            summary.started,
            summary.published,
            summary.failed,
            summary.budget_used,
            summary.best_score,
            summary.best_submission_id,
            summary.final_submission_id,
            summary.status,
            summary.best_basis,
        )
        # Like with like only when every Submission ran on the same indices.
        index_sets = {tuple(range(len(r or [0]))) for r in plans}
        expected_basis = (
            "single" if len(plans) == 1 else "matched" if len(index_sets) == 1 else "unmatched"
        )
        assert summary.best_basis == expected_basis

        (history,) = read_histories(store, RunFilter())
        assert history.best_train_score == summary.best_score
        assert [s.submission_id for s in history.published] == list(scores)

        replay = replay_run(store, "r")
        assert (replay.submissions, replay.published, replay.failed) == (
            summary.started,
            summary.published,
            summary.failed,
        )
        assert replay.best_submission_id == summary.best_submission_id
        marked = [e.submission_id for e in replay.timeline if getattr(e, "best_so_far", False)]
        assert marked[-1:] == ([expected] if expected is not None else [])


def test_a_run_is_known_by_its_stream_even_when_run_created_names_another(store: Store) -> None:
    """A RunCreated naming another Run (a fault replay reports) does not make two readers
    disagree on which Run it is, nor break the read models' catch-up."""
    from evopolicygym.records.events import new_event

    write_run(store, SynthRun("src", [Planned(_files(1.0), [0], [1.0])]))
    (created, *_rest) = [e.event() for e in store.events.read_stream("run-src", 0)]
    store.events.append("run-alias", [new_event(created, "alias-1")], 0)
    assert summarize(store.events, "run-alias").run_id == "alias"
    refresh(store)
    write_run(store, SynthRun("later", [Planned(_files(2.0), [0], [2.0])]))
    refresh(store)  # an incremental catch-up finds the rows it wrote before
    with open_read_models(store, read_only=True) as db:
        rows = db.execute("SELECT run_id, benchmark_id FROM runs ORDER BY run_id").fetchall()
    assert rows == [("alias", "toy-counter"), ("later", "toy-counter"), ("src", "toy-counter")]

"""The study's diagnostics on frames whose figures are worked out by hand: ties in the rank
score, a minimized Benchmark, negative rewards, Runs without an Assessment score, and
properties of the rank score over any table (hypothesis)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.analysis import RUNS_COLUMNS, SUBMISSIONS_COLUMNS
from evopolicygym.analysis import diagnostics as d
from evopolicygym.analysis.dataframes import _frame
from evopolicygym.records.runs import better


def runs(*rows: dict[str, Any]) -> pd.DataFrame:
    base = {
        "score_direction": "maximize",
        "budget_total": 10,
        "status": "finished",
        "episodes": 0,
        "failed_episodes": 0,
        "submissions": 0,
        "failed": 0,
    }
    return _frame([{**base, **row} for row in rows], RUNS_COLUMNS)


def subs(*rows: dict[str, Any]) -> pd.DataFrame:
    base = {
        "score_direction": "maximize",
        "status": "published",
        "published": True,
        "failed": False,
    }
    return _frame([{**base, **row} for row in rows], SUBMISSIONS_COLUMNS)


def scored(
    agent: str, benchmark: str, values: list[float | None], direction: str = "maximize"
) -> list[dict[str, Any]]:
    return [
        {
            "run_id": f"{agent}-{benchmark}-{i}",
            "agent": agent,
            "benchmark": benchmark,
            "score_direction": direction,
            "assessment_score": v,
        }
        for i, v in enumerate(values)
    ]


# --------------------------------------------------------------------------- scores


def test_mean_sd_and_t_interval_keep_unscored_runs_counted() -> None:
    table = d.score_table(runs(*scored("a", "b", [1.0, 2.0, 3.0, None])))
    row = table.iloc[0]
    assert (row["runs"], row["scored"], row["unscored"]) == (4, 3, 1)
    assert row["mean"] == 2.0 and row["sd"] == 1.0
    half = 4.303 / math.sqrt(3)  # t(0.975, 2) = 4.303
    assert row["ci_low"] == pytest.approx(2.0 - half) and row["ci_high"] == pytest.approx(
        2.0 + half
    )
    lone = d.score_table(runs(*scored("a", "b", [5.0, None, None]))).iloc[0]
    assert (lone["scored"], lone["unscored"], lone["mean"]) == (1, 2, 5.0) and math.isnan(
        lone["sd"]
    )
    assert math.isnan(lone["ci_low"])
    none = d.score_table(runs(*scored("a", "b", [None]))).iloc[0]
    assert none["runs"] == 1 and none["scored"] == 0 and math.isnan(none["mean"])


def test_t_quantiles() -> None:
    assert d.t_quantile(1) == 12.706 and d.t_quantile(4) == 2.776 and d.t_quantile(30) == 2.042
    assert d.t_quantile(45) == 2.021  # between rows: the next lower, a wider interval
    assert d.t_quantile(10_000) == 1.960
    with pytest.raises(ValueError):
        d.t_quantile(0)


def test_only_each_cells_current_run_counts() -> None:
    rows = scored("a", "b", [1.0, 100.0, 3.0])
    rows[0]["current"], rows[1]["current"], rows[2]["current"] = (
        True,
        False,
        True,
    )  # 100: a retried attempt
    table = d.score_table(runs(*rows))
    assert table.iloc[0]["runs"] == 2 and table.iloc[0]["mean"] == 2.0


# --------------------------------------------------------------------------- the rank score


def test_rank_score_by_hand_with_ties_a_minimized_benchmark_and_negative_rewards() -> None:
    table = d.score_table(
        runs(
            # up (maximize): x and y tie at 10 and both take rank 1; z is 3rd.
            *scored("x", "up", [9.0, 11.0]),
            *scored("y", "up", [10.0]),
            *scored("z", "up", [5.0]),
            # down (minimize): y 1st, z 2nd, x 3rd.
            *scored("x", "down", [3.0], "minimize"),
            *scored("y", "down", [1.0], "minimize"),
            *scored("z", "down", [2.0], "minimize"),
            # neg (maximize, negative rewards): y -80 1st, x -100 2nd, z has no score: last.
            *scored("x", "neg", [-120.0, -80.0]),
            *scored("y", "neg", [-80.0]),
            *scored("z", "neg", [None]),
        )
    )
    board = d.rank_scores(table).set_index("agent")
    k = 3
    assert (
        board.loc["x", "rank_up"] == 1
        and board.loc["y", "rank_up"] == 1
        and board.loc["z", "rank_up"] == 3
    )
    assert (
        board.loc["y", "rank_down"],
        board.loc["z", "rank_down"],
        board.loc["x", "rank_down"],
    ) == (1, 2, 3)
    assert (board.loc["y", "rank_neg"], board.loc["x", "rank_neg"], board.loc["z", "rank_neg"]) == (
        1,
        2,
        3,
    )
    assert board.loc["x", "rank_score"] == pytest.approx(((k - 1) / 2 + 0 + (k - 2) / 2) / 3)  # 0.5
    assert board.loc["y", "rank_score"] == pytest.approx(1.0)
    assert board.loc["z", "rank_score"] == pytest.approx((0 + 0.5 + 0) / 3)
    assert list(board.index) == ["y", "x", "z"]  # best first
    assert (board["benchmarks"] == 3).all()


def test_five_agents_give_the_papers_score_and_one_agent_scores_one() -> None:
    rows = [r for i, a in enumerate("abcde") for r in scored(a, "t", [float(i)])]
    board = d.rank_scores(d.score_table(runs(*rows))).set_index("agent")
    for i, agent in enumerate("edcba"):  # e is best (4.0): rank 1
        assert board.loc[agent, "rank_score"] == pytest.approx((5 - (i + 1)) / 4)
    assert (
        d.rank_scores(d.score_table(runs(*scored("solo", "t", [1.0])))).iloc[0]["rank_score"] == 1.0
    )


@st.composite
def tables(draw: Any) -> list[dict[str, Any]]:
    agents = draw(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=6, unique=True))
    benchmarks = draw(st.lists(st.sampled_from("PQRS"), min_size=1, max_size=3, unique=True))
    rows = []
    for b in benchmarks:
        direction = draw(st.sampled_from(["maximize", "minimize"]))
        for a in agents:
            values = draw(
                st.lists(
                    st.one_of(st.none(), st.sampled_from([-50.0, -1.0, 0.0, 2.5, 7.0])),
                    min_size=1,
                    max_size=3,
                )
            )
            rows.extend(scored(a, b, values, direction))
    return rows


@given(tables(), st.randoms())
@settings(max_examples=60, deadline=None)
def test_rank_score_is_in_0_1_and_does_not_depend_on_the_order_of_agents(
    rows: list[dict[str, Any]], rnd: Any
) -> None:
    board = d.rank_scores(d.score_table(runs(*rows))).set_index("agent")
    assert ((board["rank_score"] >= 0) & (board["rank_score"] <= 1)).all()
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    again = d.rank_scores(d.score_table(runs(*shuffled))).set_index("agent")
    pd.testing.assert_frame_equal(board.sort_index(), again.sort_index())
    # Renaming the agents renames the rows, nothing else.
    names = {a: f"agent-{a}" for a in board.index}
    renamed = d.rank_scores(
        d.score_table(runs(*[{**r, "agent": names[r["agent"]]} for r in rows]))
    ).set_index("agent")
    assert (
        renamed.loc[[names[a] for a in board.index], "rank_score"].tolist()
        == board["rank_score"].tolist()
    )


# --------------------------------------------------------------------------- selection validity


def test_spearman_by_hand() -> None:
    assert d.spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    assert d.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(
        1.5 / math.sqrt(3)
    )  # average ranks for the tie
    assert d.spearman([1, 2], [1, 2]) is None  # too few pairs
    assert d.spearman([1, 1, 1], [1, 2, 3]) is None  # constant
    assert d.spearman([1, None, 2, 3], [3, 9, 2, 1]) == pytest.approx(
        -1.0
    )  # a missing pair is left out


def test_selection_validity_per_run_per_benchmark_and_per_candidate() -> None:
    frame = runs(
        *[
            {
                "run_id": f"r{i}",
                "agent": "a",
                "benchmark": "t",
                "validation_score": v,
                "assessment_score": s,
            }
            for i, (v, s) in enumerate(
                [(1.0, 2.0), (2.0, 1.0), (3.0, 4.0), (4.0, 5.0), (5.0, None)]
            )
        ]
    )
    candidates = subs(
        *[
            {
                "run_id": "r0",
                "submission_id": i,
                "candidate": True,
                "validation_score": v,
                "assessment_score": s,
            }
            for i, (v, s) in enumerate([(1.0, 1.0), (2.0, 3.0), (3.0, 2.0)], start=1)
        ]
    )
    found = d.selection_validity(frame, candidates)
    assert found["runs"]["gap"].tolist()[:4] == [1.0, -1.0, 1.0, 1.0] and math.isnan(
        found["runs"]["gap"].iloc[4]
    )
    bench = found["benchmarks"].iloc[0]
    assert (
        bench["pairs"] == 4 and bench["spearman"] == pytest.approx(0.8) and bench["mean_gap"] == 0.5
    )
    [(run_id, n, rho)] = found["candidates"].itertuples(index=False)
    assert (run_id, n) == ("r0", 3) and rho == pytest.approx(0.5)


# --------------------------------------------------------------------------- improvement efficiency


@pytest.mark.parametrize(
    ("direction", "scores"),
    [
        ("maximize", [1.0, 3.0, 2.0]),
        ("minimize", [3.0, 1.0, 2.0]),
        ("maximize", [-300.0, -100.0, -200.0]),
    ],
)
def test_efficiency_area_by_hand(direction: str, scores: list[float]) -> None:
    frame = runs(
        {
            "run_id": "r",
            "agent": "a",
            "benchmark": "t",
            "score_direction": direction,
            "budget_total": 10,
        }
    )
    best = [scores[0], scores[1], scores[1]]
    submissions = subs(
        *[
            {
                "run_id": "r",
                "submission_id": i + 1,
                "benchmark_id": "t",
                "score_direction": direction,
                "score": s,
                "cumulative_episodes": used,
                "best_so_far": i < 2,
                "best_so_far_score": best[i],
                "best_so_far_basis": ["first", "matched", "unmatched"][i],
            }
            for i, (s, used) in enumerate(zip(scores, [2, 5, 8], strict=True))
        ]
    )
    curves = d.efficiency_curves(frame, submissions)
    assert curves["episodes_used"].tolist() == [2, 5] and curves["normalized"].tolist() == [
        0.0,
        1.0,
    ]
    assert curves["basis"].tolist() == ["first", "matched"]
    found = d.improvement_efficiency(frame, submissions)
    # 0 until Episode 5 (the first score is the worst), then 1 for the last 5 of 10.
    assert found["runs"].iloc[0]["area"] == pytest.approx(0.5)
    assert found["groups"].iloc[0]["area"] == pytest.approx(0.5)


def test_a_run_that_never_published_has_area_zero_and_is_kept() -> None:
    frame = runs(
        {"run_id": "r", "agent": "a", "benchmark": "t"},
        {"run_id": "s", "agent": "a", "benchmark": "t"},
    )
    submissions = subs(
        {
            "run_id": "s",
            "submission_id": 1,
            "benchmark_id": "t",
            "score": 4.0,
            "cumulative_episodes": 10,
            "best_so_far": True,
            "best_so_far_score": 4.0,
            "best_so_far_basis": "first",
        }
    )
    found = d.improvement_efficiency(frame, submissions)
    assert found["runs"]["area"].tolist() == [0.0, 0.0]  # s's only score came with the last Episode
    assert found["groups"].iloc[0]["runs"] == 2


# -------------------------------------------------------------------------- edits, budget, failures


def test_edit_dynamics_by_hand() -> None:
    frame = runs({"run_id": "r", "agent": "a", "benchmark": "t"})
    submissions = subs(
        *[
            {"run_id": "r", "submission_id": i, "edit_kind": k, "beats_parent": b}
            for i, (k, b) in enumerate(
                [("synthesis", True), ("parametric", False), ("parametric", None), ("none", True)],
                1,
            )
        ]
    )
    row = d.edit_dynamics(frame, submissions).iloc[0]
    assert (row["synthesis"], row["parametric"], row["cosmetic"], row["none"]) == (
        0.25,
        0.5,
        0.0,
        0.25,
    )
    assert (row["hits"], row["comparable"], row["hit_rate"]) == (2, 3, 0.5)
    assert row["matched_hit_rate"] == pytest.approx(2 / 3)


def test_budget_use_and_failure_shares_by_hand() -> None:
    frame = runs(
        {
            "run_id": "r",
            "agent": "a",
            "benchmark": "t",
            "budget_share": 0.5,
            "episodes": 4,
            "failed_episodes": 1,
            "submissions": 2,
            "failed": 1,
            "status": "finished",
        },
        {
            "run_id": "s",
            "agent": "a",
            "benchmark": "t",
            "budget_share": 1.0,
            "episodes": 6,
            "failed_episodes": 0,
            "submissions": 3,
            "failed": 0,
            "status": "agent_failed",
        },
    )
    row = d.budget_use(frame).iloc[0]
    assert row["budget_share"] == 0.75 and row["failed_episode_share"] == 0.1
    assert row["failed_submission_share"] == 0.2
    assert row["terminal_reasons"] == {"agent_failed": 1, "finished": 1}


def test_study_is_plain_json_values() -> None:
    import json

    frame = runs(*scored("x", "t", [1.0, None]), *scored("y", "t", [2.0]))
    found = d.study(frame, subs())
    text = json.dumps(found, allow_nan=False)  # no NaN: missing is null
    assert json.loads(text)["leaderboard"] == [
        {"agent": "y", "rank_score": 1.0, "benchmarks": 1, "ranks": {"t": 1}},
        {"agent": "x", "rank_score": 0.0, "benchmarks": 1, "ranks": {"t": 2}},
    ]
    assert set(found) == {
        "runs",
        "scores",
        "leaderboard",
        "selection_validity",
        "improvement_efficiency",
        "edit_dynamics",
        "budget_use",
    }


@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=3, max_size=12))
@settings(max_examples=100, deadline=None)
def test_spearman_is_symmetric_and_within_minus_one_and_one(pairs: list[tuple[int, int]]) -> None:
    x, y = [a for a, _ in pairs], [b for _, b in pairs]
    rho = d.spearman(x, y)
    assert rho == d.spearman(y, x) or (rho is not None and rho == pytest.approx(d.spearman(y, x)))
    if rho is not None:
        assert -1 - 1e-9 <= rho <= 1 + 1e-9
        assert d.spearman(x, [-v for v in y]) == pytest.approx(-rho)


@given(
    st.lists(
        st.tuples(st.integers(1, 10), st.floats(-500, 500, allow_nan=False)), min_size=1, max_size=8
    ),
    st.sampled_from(["maximize", "minimize"]),
)
@settings(max_examples=100, deadline=None)
def test_efficiency_area_is_within_0_and_1(steps: list[tuple[int, float]], direction: str) -> None:
    used, best, rows = 0, None, []
    for i, (cost, score) in enumerate(steps, 1):
        used += cost
        new = better(score, best, direction)
        best = score if new else best
        rows.append(
            {
                "run_id": "r",
                "submission_id": i,
                "benchmark_id": "t",
                "score_direction": direction,
                "score": score,
                "cumulative_episodes": used,
                "best_so_far": new,
                "best_so_far_score": best,
            }
        )
    frame = runs(
        {
            "run_id": "r",
            "agent": "a",
            "benchmark": "t",
            "score_direction": direction,
            "budget_total": used,
        }
    )
    area = d.improvement_efficiency(frame, subs(*rows))["runs"].iloc[0]["area"]
    assert 0.0 <= area <= 1.0

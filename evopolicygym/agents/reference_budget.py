"""The reference agent's budget planning: what ``task.json`` allows and how to spend it.

``Task`` reads the Run's budget rules from ``task.json``; ``plan_budget`` turns them into a
``BudgetPlan``: matched evaluations of ``k`` Episodes on the same pool indices, then
confirmations that re-evaluate the best candidates on fresh indices. Pure functions of
numbers: the search (``reference_search``) plans with them before and during a run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BudgetPlan", "Task", "default_episodes_per_evaluation", "plan_budget"]


# --------------------------------------------------------------------------- the task


@dataclass(frozen=True)
class Task:
    """``task.json``: the public Benchmark spec and the Run's budget rules."""

    benchmark: dict[str, Any]
    episode_budget: int
    episode_pool_size: int
    max_submissions: int | None
    max_episodes_per_submission: int
    finish_budget_policy: str
    max_candidates: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        budget = int(data["episode_budget"])
        pool = int(data.get("episode_pool_size") or budget)
        subs = data.get("max_submissions")
        return cls(
            benchmark=dict(data.get("benchmark") or {}),
            episode_budget=budget,
            episode_pool_size=pool,
            max_submissions=None if subs is None else int(subs),
            max_episodes_per_submission=int(data.get("max_episodes_per_submission") or pool),
            finish_budget_policy=str(data.get("finish_budget_policy", "allow_early")),
            max_candidates=max(1, int(data.get("max_candidates") or 1)),
        )

    @property
    def exhaust(self) -> bool:
        return self.finish_budget_policy == "require_budget_exhaustion"

    @property
    def maximize(self) -> bool:
        return self.benchmark.get("score_direction", "maximize") != "minimize"

    @property
    def failure_score(self) -> float | None:
        """What a failed Episode scores: no completed Episode scores worse."""
        score = self.benchmark.get("failure_score")
        return (
            float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None
        )


# --------------------------------------------------------------------------- budget planning


@dataclass(frozen=True)
class BudgetPlan:
    """``evaluations`` submissions of ``episodes_per_evaluation`` Episodes on the matched
    indices ``0..k-1``, then one submission per entry of ``confirmations`` (its size) that
    re-evaluates top candidates on fresh indices."""

    episodes_per_evaluation: int
    evaluations: int
    confirmations: tuple[int, ...] = ()

    @property
    def episodes(self) -> int:
        return self.episodes_per_evaluation * self.evaluations + sum(self.confirmations)

    @property
    def submissions(self) -> int:
        return self.evaluations + len(self.confirmations)

    @property
    def matched_indices(self) -> list[int]:
        return list(range(self.episodes_per_evaluation))


def default_episodes_per_evaluation(budget: int) -> int:
    """About sqrt(budget)/2 Episodes per evaluation (4 for 64): enough Episodes to rank
    candidates, enough evaluations to search."""
    return max(1, round(math.sqrt(max(budget, 1)) / 2))


def _chunks(total: int, cap: int) -> list[int]:
    """``total`` split into as few parts of at most ``cap`` as possible, sizes within one."""
    if total <= 0:
        return []
    parts = -(-total // cap)
    size, extra = divmod(total, parts)
    return [size + 1] * extra + [size] * (parts - extra)


def plan_budget(
    budget: int,
    pool_size: int,
    max_submissions: int | None,
    max_episodes_per_submission: int,
    exhaust: bool,
    *,
    episodes_per_evaluation: int | None = None,
    fixed: bool = False,
    reserve: int | None = None,
    min_evaluations: int = 1,
) -> BudgetPlan:
    """How to spend ``budget`` Episodes.

    Matched evaluations of ``k`` Episodes (``episodes_per_evaluation``, by default
    ``default_episodes_per_evaluation``; never above the per-submission limit, the pool or
    the budget) come first; ``reserve`` Episodes (default ``k`` when the budget holds four
    evaluations) and any remainder go to confirmations. When ``max_submissions`` is too
    small for that, ``k`` grows (unless ``fixed``) so the evaluations still fit. With
    ``exhaust`` the plan spends the budget exactly whenever the limits allow it; without, it
    spends as much as the limits allow. It never plans beyond the budget or the limits.
    """
    cap = max(1, min(max_episodes_per_submission, pool_size))
    subs = budget if max_submissions is None else max(0, max_submissions)
    wanted = episodes_per_evaluation or default_episodes_per_evaluation(budget)
    k = max(1, min(wanted, cap) if fixed else min(wanted, cap, max(budget, 1)))
    if budget <= 0 or subs <= 0:
        return BudgetPlan(k, 0)
    if reserve is None:
        reserve = k if budget >= 4 * k else 0
    reserve = max(0, min(reserve, budget))
    desired = max(min_evaluations, (budget - reserve) // k)
    sizes = [k] if fixed else _sizes(k, min(cap, budget))

    def exact(kk: int) -> BudgetPlan | None:
        """The most evaluations of ``kk`` (up to ``desired``) that still spend the budget."""

        def fits(n: int) -> bool:
            return n + len(_chunks(budget - n * kk, cap)) <= subs

        low, high = min_evaluations, min(desired, budget // kk)
        if high < low or not fits(low):
            return None
        # More evaluations never take fewer submissions (kk <= cap): bisect the largest fit.
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(middle) else (low, middle - 1)
        return BudgetPlan(kk, low, tuple(_chunks(budget - low * kk, cap)))

    def partial(kk: int) -> BudgetPlan | None:
        n = min(desired, budget // kk, subs)
        if n < min_evaluations:
            return None
        return BudgetPlan(kk, n, tuple(_chunks(budget - n * kk, cap)[: subs - n]))

    best: BudgetPlan | None = None
    if exhaust:
        for kk in sizes:
            plan = exact(kk)
            if plan is not None and (best is None or plan.evaluations > best.evaluations):
                best = plan
            if best is not None and best.evaluations >= min(desired, budget // kk):
                break  # a larger kk cannot give more evaluations
        if best is not None:
            return best
    # Nothing forces spending, but unspent budget is evidence never gathered: among the plans
    # with the most evaluations, take the one that spends the most (then the smallest k).
    for kk in sizes:
        plan = partial(kk)
        if plan is not None and (
            best is None or (plan.evaluations, plan.episodes) > (best.evaluations, best.episodes)
        ):
            best = plan
    return best or BudgetPlan(k, 0)


def _sizes(low: int, high: int) -> list[int]:
    """Candidate evaluation sizes from ``low`` to ``high``: all of them, or a geometric
    sample when there are too many to try one by one."""
    if high - low <= 4096:
        return list(range(low, high + 1))
    out, size = [], low
    while size < high:
        out.append(size)
        size = max(size + 1, int(size * 1.01))
    return [*out, high]

"""Fitting a template to what a program does on probe observations (behaviour cloning).

Owns ``fit_template``: softmax regression for discrete actions, ridge least squares
(with a choice of gains) for Box actions, a copy per state for tables, and the
``agreement`` of the fit with the probed program, so a synthesis edit starts close to
the current behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evopolicygym.agents.edits.spaces import SpaceInfo
from evopolicygym.agents.edits.templates import (
    TemplateFit,
    action_bounds,
    features,
    flatten_numbers,
    is_quadratic,
    template_library,
)

__all__ = ["fit_template"]


def _n_inputs(name: str, info: SpaceInfo) -> int:
    return info.obs_size * (2 if is_quadratic(name) else 1)


def _n_outputs(name: str, info: SpaceInfo) -> int:
    if name.endswith("threshold"):
        return 1
    return info.act_size


def _discrete_action(action: Any, info: SpaceInfo) -> int | None:
    try:
        value = int(flatten_numbers(action)[0]) - info.act_start
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return value if 0 <= value < info.act_size else None


def _box_action(action: Any, info: SpaceInfo) -> list[float] | None:
    try:
        values = flatten_numbers(action)
    except (TypeError, ValueError, OverflowError):
        return None
    if len(values) != info.act_size or not all(math.isfinite(v) for v in values):
        return None
    return values


def _normalise(fit: TemplateFit) -> None:
    """Scale so the largest weight is 1: threshold and argmax decisions do not change."""
    largest = max((abs(v) for row in fit.weights for v in row), default=0.0)
    largest = max(largest, max((abs(b) for b in fit.bias), default=0.0))
    if largest > 0:
        fit.weights = [[v / largest for v in row] for row in fit.weights]
        fit.bias = [b / largest for b in fit.bias]


def _softmax_regression(
    xs: list[list[float]], ys: list[int], classes: int, steps: int = 300
) -> TemplateFit:
    """Multinomial logistic regression by full-batch gradient descent, lightly L2-regularised."""
    n_in = len(xs[0]) if xs else 0
    weights = [[0.0] * n_in for _ in range(classes)]
    bias = [0.0] * classes
    rate, l2 = 0.5, 1e-3
    for _ in range(steps):
        grad_w = [[0.0] * n_in for _ in range(classes)]
        grad_b = [0.0] * classes
        for x, y in zip(xs, ys, strict=True):
            scores = [
                b + sum(w * v for w, v in zip(row, x, strict=True))
                for row, b in zip(weights, bias, strict=True)
            ]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            total = sum(exps)
            for k in range(classes):
                error = exps[k] / total - (1.0 if k == y else 0.0)
                grad_b[k] += error
                row = grad_w[k]
                for j, v in enumerate(x):
                    row[j] += error * v
        scale = rate / max(1, len(xs))
        for k in range(classes):
            bias[k] -= scale * grad_b[k]
            for j in range(n_in):
                weights[k][j] -= scale * grad_w[k][j] + rate * l2 * weights[k][j]
    return TemplateFit(name="", weights=weights, bias=bias)


def _least_squares(
    xs: list[list[float]], ys: list[list[float]], ridge: float = 1e-3
) -> TemplateFit:
    """Ridge regression per output through the normal equations (Gaussian elimination)."""
    n_in = len(xs[0]) + 1
    rows = [[*x, 1.0] for x in xs]
    gram = [
        [sum(r[i] * r[j] for r in rows) + (ridge if i == j else 0.0) for j in range(n_in)]
        for i in range(n_in)
    ]
    weights: list[list[float]] = []
    bias: list[float] = []
    for out in range(len(ys[0])):
        rhs = [sum(r[i] * y[out] for r, y in zip(rows, ys, strict=True)) for i in range(n_in)]
        solution = _solve([row[:] for row in gram], rhs)
        weights.append(solution[:-1])
        bias.append(solution[-1])
    return TemplateFit(name="", weights=weights, bias=bias)


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    n = len(rhs)
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(matrix[r][col]))
        matrix[col], matrix[pivot] = matrix[pivot], matrix[col]
        rhs[col], rhs[pivot] = rhs[pivot], rhs[col]
        if abs(matrix[col][col]) < 1e-12:
            continue
        for r in range(col + 1, n):
            factor = matrix[r][col] / matrix[col][col]
            if factor:
                for c in range(col, n):
                    matrix[r][c] -= factor * matrix[col][c]
                rhs[r] -= factor * rhs[col]
    solution = [0.0] * n
    for r in range(n - 1, -1, -1):
        if abs(matrix[r][r]) < 1e-12:
            continue
        solution[r] = (rhs[r] - sum(matrix[r][c] * solution[c] for c in range(r + 1, n))) / matrix[
            r
        ][r]
    return solution


def fit_template(
    name: str,
    info: SpaceInfo,
    observations: Sequence[Any] = (),
    actions: Sequence[Any] = (),
) -> TemplateFit:
    """Parameters for template ``name`` that imitate ``actions`` taken on ``observations``.

    Without usable probe data the parameters are neutral (zeros; the table rows prefer the
    first action), and ``agreement`` stays ``None``.
    """
    if name not in template_library(info):
        raise ValueError(f"template {name!r} does not fit these spaces")
    pairs = list(zip(observations, actions, strict=False))
    if name == "action-table":
        table = [[0.0] * info.act_size for _ in range(info.obs_size)]
        fit = TemplateFit(name=name, table=table)
        seen = 0
        for obs, action in pairs:
            a = _discrete_action(action, info)
            state = _discrete_state(obs, info)
            if a is not None and state is not None:
                table[state] = [1.0 if k == a else 0.0 for k in range(info.act_size)]
                seen += 1
        fit.agreement = seen / len(pairs) if pairs else None
        return fit
    if name == "value-table":
        low, high = action_bounds(info)
        middle = [
            0.0 if lo is None or hi is None else (lo + hi) / 2
            for lo, hi in zip(low, high, strict=True)
        ]
        table = [list(middle) for _ in range(info.obs_size)]
        fit = TemplateFit(name=name, table=table)
        seen = 0
        for obs, action in pairs:
            values = _box_action(action, info)
            state = _discrete_state(obs, info)
            if values is not None and state is not None:
                table[state] = values
                seen += 1
        fit.agreement = seen / len(pairs) if pairs else None
        return fit

    xs: list[list[float]] = []
    targets: list[Any] = []
    for obs, action in pairs:
        try:
            x = features(name, info, obs)
        except (TypeError, ValueError, OverflowError):
            continue
        if len(x) != _n_inputs(name, info) or not all(math.isfinite(v) for v in x):
            continue
        target = (
            _box_action(action, info) if info.act_kind == "box" else _discrete_action(action, info)
        )
        if target is not None:
            xs.append(x)
            targets.append(target)
    n_in, n_out = _n_inputs(name, info), _n_outputs(name, info)
    if not xs:
        return TemplateFit(
            name=name, weights=[[0.0] * n_in for _ in range(n_out)], bias=[0.0] * n_out
        )
    if info.act_kind == "box":
        fit = _least_squares(xs, targets)
        fit.name = name
        # A saturating rule (full force one way or the other) is a clipped linear map with a
        # high gain: try larger gains, keep the one that imitates best.
        gains = [fit]
        for gain in (2.0, 4.0, 8.0, 16.0, 32.0):
            scaled = fit.copy()
            scaled.weights = [[gain * v for v in row] for row in fit.weights]
            scaled.bias = [gain * b for b in fit.bias]
            gains.append(scaled)
        fit = max(gains, key=lambda f: _agreement(f, info, xs, targets))
    elif name.endswith("threshold"):
        two = _softmax_regression(xs, targets, 2)
        # Two-class softmax is a threshold on the difference of the two scores.
        fit = TemplateFit(
            name="",
            weights=[[b - a for a, b in zip(two.weights[0], two.weights[1], strict=True)]],
            bias=[two.bias[1] - two.bias[0]],
        )
        _normalise(fit)
    else:
        fit = _softmax_regression(xs, targets, info.act_size)
        _normalise(fit)
    fit.name = name
    fit.agreement = _agreement(fit, info, xs, targets)
    return fit


def _discrete_state(obs: Any, info: SpaceInfo) -> int | None:
    try:
        state = int(flatten_numbers(obs)[0]) - info.obs_start
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return state if 0 <= state < info.obs_size else None


def _agreement(
    fit: TemplateFit, info: SpaceInfo, xs: list[list[float]], targets: list[Any]
) -> float:
    hits = 0.0
    low, high = action_bounds(info)
    for x, target in zip(xs, targets, strict=True):
        outputs = [
            b + sum(w * v for w, v in zip(row, x, strict=True))
            for row, b in zip(fit.weights, fit.bias, strict=True)
        ]
        if info.act_kind == "box":
            clipped = [
                min(max(v, lo if lo is not None else -math.inf), hi if hi is not None else math.inf)
                for v, lo, hi in zip(outputs, low, high, strict=True)
            ]
            spread = [
                1.0 if lo is None or hi is None else max(hi - lo, 1e-9)
                for lo, hi in zip(low, high, strict=True)
            ]
            # Counted as agreeing when within 5% of the action range.
            hits += all(
                abs(c - t) <= 0.05 * s for c, t, s in zip(clipped, target, spread, strict=True)
            )
        elif fit.name.endswith("threshold"):
            hits += (1 if outputs[0] > 0 else 0) == target
        else:
            hits += max(range(len(outputs)), key=outputs.__getitem__) == target
    return hits / len(xs)

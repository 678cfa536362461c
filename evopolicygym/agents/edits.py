"""Program edits for the reference agent: constants, rule templates, probes, edit kinds.

Two kinds of edit change a policy program:

- a **parametric** edit keeps the program's structure and perturbs its tunable numeric
  constants (floats found with ``ast``; ints are left alone, since in a policy they are
  usually actions, indices or counts);
- a **synthesis** edit replaces the rule structure with a template from a small library
  chosen from the observation and action spaces, seeded by fitting the template to what
  the current program does on probe observations (behaviour cloning), so it starts close
  to the current behaviour.

``classify_edit`` tells the two apart by comparing ASTs with numeric constants stripped.
Generated programs are self-contained, stdlib-only ``policy.py`` files.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "FROZEN_NAMES",
    "PROBE_SCRIPT",
    "TEMPLATE_DESCRIPTIONS",
    "EditKind",
    "NumericConstant",
    "ProbeResult",
    "SpaceInfo",
    "TemplateFit",
    "apply_step",
    "classify_edit",
    "detect_template",
    "find_constants",
    "fit_template",
    "format_number",
    "mutate_constants",
    "render_template",
    "replace_constants",
    "run_probe",
    "space_info",
    "strip_constants",
    "template_library",
]

EditKind = Literal["synthesis", "parametric", "none"]

# Module-level names whose constants describe the spaces rather than the rule: never tuned.
FROZEN_NAMES = frozenset({"OBS_SCALE", "OBS_START", "ACTION_START", "ACTION_LOW", "ACTION_HIGH"})
# A constant smaller than this fraction of the largest one is perturbed as if it were that
# large: a weight at 0.0 must be able to become as important as the others.
FLOOR_FRACTION = 1.0
# Larger observations (images) get no linear template: too many weights to tune from a budget.
MAX_LINEAR_INPUTS = 64
MAX_TABLE_STATES = 4096
# Box bounds beyond this are treated as unbounded (float32 max and friends).
HUGE_BOUND = 1e6


# --------------------------------------------------------------------------- numeric constants


@dataclass(frozen=True, slots=True)
class NumericConstant:
    """A tunable float literal, with its source span (1-based lines, byte columns)."""

    value: float
    lineno: int
    col: int
    end_lineno: int
    end_col: int


def _number(node: ast.AST) -> float | int | None:
    """The value of a numeric literal, with a leading unary minus/plus folded in."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value: float | int = node.value  # type: ignore[assignment]
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _frozen_nodes(tree: ast.AST, frozen_names: frozenset[str]) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        value: ast.expr | None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if value is not None and any(
            isinstance(t, ast.Name) and t.id in frozen_names for t in targets
        ):
            skipped.update(id(n) for n in ast.walk(value))
    return skipped


def find_constants(
    source: str, *, frozen_names: frozenset[str] = FROZEN_NAMES
) -> list[NumericConstant]:
    """Tunable float literals of ``source`` in source order (``-0.5`` counts as one)."""
    tree = ast.parse(source)
    skipped = _frozen_nodes(tree, frozen_names)
    found: list[NumericConstant] = []
    inside_negation: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in skipped or id(node) in inside_negation:
            continue
        value = _number(node)
        if not isinstance(value, float):
            continue
        if isinstance(node, ast.UnaryOp):
            inside_negation.update(id(n) for n in ast.walk(node.operand))
        assert isinstance(node, ast.expr)  # only expressions are numbers
        assert node.end_lineno is not None and node.end_col_offset is not None
        found.append(
            NumericConstant(
                value=float(value),
                lineno=node.lineno,
                col=node.col_offset,
                end_lineno=node.end_lineno,
                end_col=node.end_col_offset,
            )
        )
    found.sort(key=lambda c: (c.lineno, c.col))
    return found


def format_number(value: float) -> str:
    """A readable float literal: four significant digits, always a float (``2.0`` not ``2``)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    text = repr(float(f"{value:.4g}"))
    return "0.0" if text == "-0.0" else text


def replace_constants(
    source: str, values: Mapping[int, float], *, frozen_names: frozenset[str] = FROZEN_NAMES
) -> str:
    """``source`` with the i-th tunable constant (as ``find_constants`` lists them) set to
    ``values[i]``; the rest of the text (comments, layout) is kept as it is."""
    constants = find_constants(source, frozen_names=frozen_names)
    lines = source.encode("utf-8").splitlines(keepends=True)
    # Right to left, so earlier spans keep their byte offsets.
    for index in sorted(
        values, key=lambda i: (constants[i].lineno, constants[i].col), reverse=True
    ):
        constant = constants[index]
        text = format_number(values[index])
        start, end = constant.lineno - 1, constant.end_lineno - 1
        head = lines[start][: constant.col]
        if text.startswith("-") and head.rstrip()[-1:] in (b"+", b"-", b"*", b"/", b"%", b"@"):
            text = f"({text})"  # "x - -0.5" parses, but reads badly
        tail = lines[end][constant.end_col :]
        lines[start : end + 1] = [head + text.encode("utf-8") + tail]
    return b"".join(lines).decode("utf-8")


def mutate_constants(
    source: str,
    rng: random.Random,
    sigma: float,
    *,
    frozen_names: frozenset[str] = FROZEN_NAMES,
) -> tuple[str, dict[int, float]]:
    """Gaussian perturbation of a few tunable constants, each scaled to its own magnitude
    (at least ``FLOOR_FRACTION`` of the largest, so a weight at 0.0 can still move).

    Returns the new source and the step taken (constant index -> delta), which
    ``apply_step`` can replay, mirrored or not.
    """
    constants = find_constants(source, frozen_names=frozen_names)
    if not constants:
        return source, {}
    largest = max(abs(c.value) for c in constants) or 1.0
    floor = FLOOR_FRACTION * largest
    n = len(constants)
    rate = _sparse_rate(n)
    indices = [i for i in range(n) if rng.random() < rate] or [rng.randrange(n)]
    step = {i: sigma * max(abs(constants[i].value), floor) * rng.gauss(0.0, 1.0) for i in indices}
    return apply_step(source, step, frozen_names=frozen_names), step


def _sparse_rate(n: int) -> float:
    """About max(1, sqrt(n)/2) of n parameters move per step: a few coordinates at a time,
    so one good move is not drowned by harmful moves of the others."""
    return min(1.0, max(1.0, math.sqrt(n) / 2) / max(n, 1))


def apply_step(
    source: str,
    step: Mapping[int, float],
    sign: float = 1.0,
    *,
    frozen_names: frozenset[str] = FROZEN_NAMES,
) -> str:
    """``source`` with ``sign * step[i]`` added to its i-th tunable constant."""
    constants = find_constants(source, frozen_names=frozen_names)
    values = {
        i: constants[i].value + sign * delta for i, delta in step.items() if i < len(constants)
    }
    return replace_constants(source, values, frozen_names=frozen_names)


class _StripNumbers(ast.NodeTransformer):
    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if _number(node) is not None:
            return ast.Constant(value=0)
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) in (int, float, complex):
            return ast.Constant(value=0)
        return node


def strip_constants(source: str) -> str:
    """An AST dump of ``source`` with every numeric literal replaced by ``0``."""
    tree = _StripNumbers().visit(ast.parse(source))
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def classify_edit(before: str, after: str) -> EditKind:
    """``parametric`` when only numeric literals changed, ``synthesis`` when the structure
    did, ``none`` when the ASTs are the same (comments and layout do not count)."""
    if strip_constants(before) != strip_constants(after):
        return "synthesis"
    dump = lambda s: ast.dump(ast.parse(s), include_attributes=False)  # noqa: E731
    return "none" if dump(before) == dump(after) else "parametric"


def detect_template(source: str) -> str | None:
    """The template a program was generated from (its module-level ``TEMPLATE`` string)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "TEMPLATE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


# --------------------------------------------------------------------------- spaces


@dataclass(frozen=True)
class SpaceInfo:
    """What the templates need to know about the observation and action spaces."""

    observation_space: Any
    action_space: Any
    obs_kind: str  # "box", "discrete" or "other"
    obs_size: int = 0  # Box: number of components; Discrete: number of states
    obs_start: int = 0
    obs_low: tuple[float | None, ...] = ()
    obs_high: tuple[float | None, ...] = ()
    obs_scale: tuple[float, ...] = ()
    act_kind: str = "other"  # "box", "discrete" or "other"
    act_size: int = 0  # Box: components; Discrete: number of actions
    act_start: int = 0
    act_shape: tuple[int, ...] = ()
    act_low: tuple[float | None, ...] = ()
    act_high: tuple[float | None, ...] = ()


def _flat_bounds(value: Any, size: int) -> tuple[float | None, ...]:
    def walk(v: Any) -> list[Any]:
        if isinstance(v, list | tuple):
            return [x for item in v for x in walk(item)]
        return [v]

    items = [value] * size if not isinstance(value, list | tuple) else walk(value)
    if len(items) != size:
        items = [None] * size
    out: list[float | None] = []
    for item in items:
        if isinstance(item, int | float) and not isinstance(item, bool) and abs(item) < HUGE_BOUND:
            out.append(float(item))
        else:
            out.append(None)
    return tuple(out)


def _box(
    space: Any,
) -> tuple[int, tuple[int, ...], tuple[float | None, ...], tuple[float | None, ...]] | None:
    if not isinstance(space, dict) or space.get("type") != "box":
        return None
    shape = tuple(int(s) for s in space.get("shape") or ())
    size = math.prod(shape) if shape else 1
    return size, shape, _flat_bounds(space.get("low"), size), _flat_bounds(space.get("high"), size)


def space_info(observation_space: Any, action_space: Any) -> SpaceInfo:
    """Summarise two public space descriptions (``{"type": "box", ...}`` and so on)."""
    fields: dict[str, Any] = {"obs_kind": "other", "act_kind": "other"}
    box = _box(observation_space)
    if box is not None:
        size, _shape, low, high = box
        scale = []
        for lo, hi in zip(low, high, strict=True):
            half = (hi - lo) / 2 if lo is not None and hi is not None else None
            scale.append(float(f"{half:.4g}") if half and half > 0 else 1.0)
        fields.update(
            obs_kind="box", obs_size=size, obs_low=low, obs_high=high, obs_scale=tuple(scale)
        )
    elif isinstance(observation_space, dict) and observation_space.get("type") == "discrete":
        fields.update(
            obs_kind="discrete",
            obs_size=int(observation_space["n"]),
            obs_start=int(observation_space.get("start", 0)),
        )
    box = _box(action_space)
    if box is not None:
        size, shape, low, high = box
        fields.update(act_kind="box", act_size=size, act_shape=shape, act_low=low, act_high=high)
    elif isinstance(action_space, dict) and action_space.get("type") == "discrete":
        fields.update(
            act_kind="discrete",
            act_size=int(action_space["n"]),
            act_start=int(action_space.get("start", 0)),
        )
    return SpaceInfo(observation_space=observation_space, action_space=action_space, **fields)


# --------------------------------------------------------------------------- templates

TEMPLATE_DESCRIPTIONS = {
    "linear-threshold": "a linear threshold rule: the second action when w . obs + b > 0, else the first",
    "quadratic-threshold": "a threshold rule on the observation and its signed squares",
    "linear-argmax": "the argmax of one linear score per action",
    "quadratic-argmax": "the argmax of one score per action, linear in the observation and its signed squares",
    "clipped-linear": "a linear map of the observation, clipped to the action bounds",
    "quadratic-clipped-linear": "a clipped map, linear in the observation and its signed squares",
    "action-table": "a table of action preferences per observed state (argmax per row)",
    "value-table": "a table of action vectors per observed state, clipped to the action bounds",
}


def template_library(info: SpaceInfo) -> list[str]:
    """The templates that fit these spaces, simplest first."""
    if info.obs_kind == "box" and 0 < info.obs_size <= MAX_LINEAR_INPUTS:
        if info.act_kind == "discrete" and info.act_size == 2:
            return ["linear-threshold", "quadratic-threshold"]
        if info.act_kind == "discrete" and info.act_size > 2:
            return ["linear-argmax", "quadratic-argmax"]
        if (
            info.act_kind == "box"
            and 0 < info.act_size <= MAX_LINEAR_INPUTS
            and len(info.act_shape) <= 1
        ):
            return ["clipped-linear", "quadratic-clipped-linear"]
    if info.obs_kind == "discrete" and 0 < info.obs_size <= MAX_TABLE_STATES:
        if info.act_kind == "discrete" and info.act_size >= 1:
            return ["action-table"]
        if (
            info.act_kind == "box"
            and 0 < info.act_size <= MAX_LINEAR_INPUTS
            and len(info.act_shape) <= 1
        ):
            return ["value-table"]
    return []


def _quadratic(name: str) -> bool:
    return name.startswith("quadratic-")


def features(name: str, info: SpaceInfo, observation: Any) -> list[float]:
    """The template's inputs for one Box observation (mirrors the generated ``features``)."""
    values = [float(v) / s for v, s in zip(_flatten(observation), info.obs_scale, strict=False)]
    if _quadratic(name):
        values += [v * abs(v) for v in values]
    return values


def _flatten(value: Any) -> list[float]:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [x for item in value for x in _flatten(item)]
    return [float(value)]


@dataclass
class TemplateFit:
    """A template's parameters: ``weights`` (one row per output) and ``bias``, or ``table``."""

    name: str
    weights: list[list[float]] = field(default_factory=list)
    bias: list[float] = field(default_factory=list)
    table: list[list[float]] = field(default_factory=list)
    agreement: float | None = (
        None  # share of probe observations where it acts as the probed program
    )

    def copy(self) -> TemplateFit:
        return TemplateFit(
            name=self.name,
            weights=[list(row) for row in self.weights],
            bias=list(self.bias),
            table=[list(row) for row in self.table],
            agreement=self.agreement,
        )

    def perturb(self, rng: random.Random, sigma: float) -> None:
        """Exploration noise, scaled like ``mutate_constants`` within each group (weights,
        biases, table). Every weight and bias moves; in a table only a few entries do, since
        each row is a decision of its own and moving all would discard the fitted copy."""
        for rows in (self.weights, [self.bias], self.table):
            flat = [abs(v) for row in rows for v in row]
            floor = FLOOR_FRACTION * (max(flat, default=0.0) or 1.0)
            rate = 1.0 if rows is not self.table else _sparse_rate(len(flat))
            for row in rows:
                for j, value in enumerate(row):
                    if rate >= 1.0 or rng.random() < rate:
                        row[j] = value + sigma * max(abs(value), floor) * rng.gauss(0.0, 1.0)


def _action_bounds(info: SpaceInfo) -> tuple[list[float | None], list[float | None]]:
    """Bounds moved inward by a hair: a float64 literal rounded to the float32 bound could
    otherwise land just outside it, and actions are validated, never clipped."""
    low: list[float | None] = []
    high: list[float | None] = []
    for lo, hi in zip(info.act_low, info.act_high, strict=True):
        margin = 1e-6 * max(1.0, abs(hi - lo)) if lo is not None and hi is not None else 1e-6
        low.append(None if lo is None else lo + margin + 1e-6 * abs(lo))
        high.append(None if hi is None else hi - margin - 1e-6 * abs(hi))
    return low, high


def _literal(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return format_number(float(value))


def _bound_literal(values: Sequence[float | None]) -> str:
    return "[" + ", ".join("None" if v is None else repr(float(f"{v:.7g}")) for v in values) + "]"


def _matrix(rows: list[list[float]], indent: str = "    ") -> str:
    if len(rows) == 1:
        return "[" + _literal(rows[0]) + "]"
    return "[\n" + "".join(f"{indent}{_literal(row)},\n" for row in rows) + "]"


_FLATTEN_SRC = '''

def flatten(value):
    """Observation components as a flat list of floats (it may arrive as a numpy array)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in flatten(item)]
    return [float(value)]
'''

_FEATURES_SRC = '''

def features(observation):
    """Each component divided by its scale{extra}."""
    values = [v / s for v, s in zip(flatten(observation), OBS_SCALE)]
    {quadratic}return values
'''

_CLIP_SRC = """

def clip(value, low, high):
    if low is not None and value < low:
        return low
    if high is not None and value > high:
        return high
    return value
"""


def _action_return(info: SpaceInfo) -> str:
    # A Box of shape () takes a bare number, any other shape a list.
    return "        return action[0]\n" if info.act_shape == () else "        return action\n"


def _features_src(name: str) -> str:
    quadratic = _quadratic(name)
    return _FEATURES_SRC.format(
        extra=", followed by their signed squares" if quadratic else "",
        quadratic="values = values + [v * abs(v) for v in values]\n    " if quadratic else "",
    )


def _header(name: str, info: SpaceInfo, fit: TemplateFit) -> str:
    tunable = "TABLE" if name.endswith("table") else "WEIGHTS and BIAS"
    fixed = "OBS_START" if info.obs_kind == "discrete" else "OBS_SCALE"
    if info.act_kind == "box":
        fixed += " and the action bounds"
    fitted = (
        f"\nFirst fitted to its parent program: it acted the same on {fit.agreement:.1%} of "
        "probe observations."
        if fit.agreement is not None
        else ""
    )
    return (
        f'"""Policy: {TEMPLATE_DESCRIPTIONS[name]}.\n\n'
        f"Written by the reference agent, which tunes the numbers in {tunable}.\n"
        f"Taken from the observation and action spaces, never tuned: {fixed}.{fitted}\n"
        '"""\n\n'
        f'TEMPLATE = "{name}"\n'
    )


def render_template(info: SpaceInfo, fit: TemplateFit) -> str:
    """The full ``policy.py`` of a template with the given parameters."""
    name = fit.name
    out = [_header(name, info, fit)]
    if name in ("action-table", "value-table"):
        out.append(f"OBS_START = {info.obs_start}\n")
        if name == "action-table":
            out.append(f"ACTION_START = {info.act_start}\n")
            out.append(
                f"# One row per state: a preference for each action; the highest wins.\nTABLE = {_matrix(fit.table)}\n"
            )
            out.append(
                "\n\nclass TablePolicy:\n"
                "    def act(self, observation):\n"
                "        row = TABLE[int(observation) - OBS_START]\n"
                "        return ACTION_START + max(range(len(row)), key=row.__getitem__)\n"
            )
        else:
            low, high = _action_bounds(info)
            out.append(
                f"ACTION_LOW = {_bound_literal(low)}\nACTION_HIGH = {_bound_literal(high)}\n"
            )
            out.append(
                f"# One row per state: the action vector to take there.\nTABLE = {_matrix(fit.table)}\n"
            )
            out.append(_CLIP_SRC)
            out.append(
                "\n\nclass TablePolicy:\n"
                "    def act(self, observation):\n"
                "        row = TABLE[int(observation) - OBS_START]\n"
                "        action = [clip(v, lo, hi) for v, lo, hi in zip(row, ACTION_LOW, ACTION_HIGH)]\n"
                + _action_return(info)
            )
        out.append("\n\ndef make_policy(context):\n    return TablePolicy()\n")
        return "".join(out)

    out.append(f"OBS_SCALE = {_literal(list(info.obs_scale))}\n")
    if name.endswith("threshold"):
        out.append(f"ACTION_START = {info.act_start}\n")
        out.append(f"WEIGHTS = {_literal(fit.weights[0])}\nBIAS = {_literal(fit.bias[0])}\n")
        body = (
            "\n\nclass LinearThreshold:\n"
            "    def act(self, observation):\n"
            "        x = features(observation)\n"
            "        score = BIAS + sum(w * v for w, v in zip(WEIGHTS, x))\n"
            "        return ACTION_START + 1 if score > 0 else ACTION_START\n"
        )
        policy = "LinearThreshold"
    elif name.endswith("argmax"):
        out.append(f"ACTION_START = {info.act_start}\n")
        out.append(
            f"# One row of weights per action.\nWEIGHTS = {_matrix(fit.weights)}\nBIAS = {_literal(fit.bias)}\n"
        )
        body = (
            "\n\nclass LinearArgmax:\n"
            "    def act(self, observation):\n"
            "        x = features(observation)\n"
            "        scores = [b + sum(w * v for w, v in zip(row, x)) for row, b in zip(WEIGHTS, BIAS)]\n"
            "        return ACTION_START + max(range(len(scores)), key=scores.__getitem__)\n"
        )
        policy = "LinearArgmax"
    else:
        low, high = _action_bounds(info)
        out.append(f"ACTION_LOW = {_bound_literal(low)}\nACTION_HIGH = {_bound_literal(high)}\n")
        out.append(
            f"# One row of weights per action component.\nWEIGHTS = {_matrix(fit.weights)}\nBIAS = {_literal(fit.bias)}\n"
        )
        body = _CLIP_SRC + (
            "\n\nclass ClippedLinear:\n"
            "    def act(self, observation):\n"
            "        x = features(observation)\n"
            "        outputs = [b + sum(w * v for w, v in zip(row, x)) for row, b in zip(WEIGHTS, BIAS)]\n"
            "        action = [clip(v, lo, hi) for v, lo, hi in zip(outputs, ACTION_LOW, ACTION_HIGH)]\n"
            + _action_return(info)
        )
        policy = "ClippedLinear"
    out.append(_FLATTEN_SRC)
    out.append(_features_src(name))
    out.append(body)
    out.append(f"\n\ndef make_policy(context):\n    return {policy}()\n")
    return "".join(out)


# --------------------------------------------------------------------------- fitting


def _n_inputs(name: str, info: SpaceInfo) -> int:
    return info.obs_size * (2 if _quadratic(name) else 1)


def _n_outputs(name: str, info: SpaceInfo) -> int:
    if name.endswith("threshold"):
        return 1
    return info.act_size


def _discrete_action(action: Any, info: SpaceInfo) -> int | None:
    try:
        value = int(_flatten(action)[0]) - info.act_start
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return value if 0 <= value < info.act_size else None


def _box_action(action: Any, info: SpaceInfo) -> list[float] | None:
    try:
        values = _flatten(action)
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
        low, high = _action_bounds(info)
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
        state = int(_flatten(obs)[0]) - info.obs_start
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return state if 0 <= state < info.obs_size else None


def _agreement(
    fit: TemplateFit, info: SpaceInfo, xs: list[list[float]], targets: list[Any]
) -> float:
    hits = 0.0
    low, high = _action_bounds(info)
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


# --------------------------------------------------------------------------- probing

PROBE_SCRIPT = '''"""Probe a policy program: feed it sampled observations and print what it does.

Usage: python probe.py PROGRAM_DIR TASK_JSON [--samples N] [--seed S]
Prints one JSON object: {"observations": [...], "actions": [...], "errors": n}.
Box observations are sampled uniformly within finite bounds, else around 0 with the
component's scale; Discrete observations are enumerated.
"""

import argparse
import importlib.util
import json
import random
import sys
import types


def sample(space, rng, count):
    if space.get("type") == "discrete":
        start, n = int(space.get("start", 0)), int(space["n"])
        return [start + i for i in range(min(n, max(count, 4096)))]
    shape = space.get("shape") or []
    size = 1
    for s in shape:
        size *= int(s)

    def flat(v):
        if isinstance(v, list):
            return [x for item in v for x in flat(item)]
        return [v]

    low, high = flat(space.get("low")), flat(space.get("high"))
    low = low * size if len(low) == 1 else low
    high = high * size if len(high) == 1 else high
    if len(low) != size or len(high) != size:
        low = high = [None] * size
    out = []
    for _ in range(count):
        obs = []
        for lo, hi in zip(low, high):
            finite = lo is not None and hi is not None and abs(lo) < 1e6 and abs(hi) < 1e6
            obs.append(round(rng.uniform(lo, hi), 4) if finite else round(rng.gauss(0.0, 1.0), 4))
        out.append(obs)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("task")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.task) as handle:
        spec = json.load(handle)["benchmark"]
    rng = random.Random(args.seed)
    random.seed(args.seed)
    observations = sample(spec["observation_space"], rng, args.samples)
    sys.path.insert(0, args.program)
    module_spec = importlib.util.spec_from_file_location("policy", args.program + "/policy.py")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["policy"] = module
    module_spec.loader.exec_module(module)
    context = types.SimpleNamespace(
        observation_space=spec["observation_space"],
        action_space=spec["action_space"],
        policy_seed=args.seed,
        metadata=spec.get("metadata") or {},
        environment_parameters=spec.get("environment_parameters") or {},
    )
    policy = module.make_policy(context)
    try:
        import numpy
    except ImportError:
        numpy = None
    actions, errors = [], 0
    for obs in observations:
        value = obs
        if numpy is not None and isinstance(obs, list):
            value = numpy.asarray(obs, dtype=numpy.float32)
            value.setflags(write=False)
        try:
            action = policy.act(value)
            if hasattr(action, "tolist"):
                action = action.tolist()
            json.dumps(action)
        except Exception:
            action, errors = None, errors + 1
        actions.append(action)
    print(json.dumps({"observations": observations, "actions": actions, "errors": errors}))


if __name__ == "__main__":
    main()
'''


@dataclass(frozen=True)
class ProbeResult:
    observations: list[Any]
    actions: list[Any]
    errors: int
    output: str  # what the probe printed (or why it failed)
    ok: bool


def run_probe(
    program_dir: str | os.PathLike[str],
    task_path: str | os.PathLike[str],
    *,
    script_path: str | os.PathLike[str] | None = None,
    samples: int = 256,
    seed: int = 0,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> ProbeResult:
    """Run ``PROBE_SCRIPT`` on a program in a child interpreter (it may crash or hang)."""
    with tempfile.TemporaryDirectory(prefix="probe-") as scratch:
        script = Path(script_path) if script_path is not None else Path(scratch) / "probe.py"
        if script_path is None:
            script.write_text(PROBE_SCRIPT)
        argv = [sys.executable, str(script), str(program_dir), str(task_path)]
        argv += ["--samples", str(samples), "--seed", str(seed)]
        try:
            done = subprocess.run(
                argv,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ProbeResult([], [], 0, f"probe failed: {exc}", False)
    output = done.stdout + (done.stderr[-2000:] if done.returncode else "")
    if done.returncode != 0:
        return ProbeResult([], [], 0, output + f"\nexit code: {done.returncode}", False)
    try:
        data = json.loads(done.stdout)
        return ProbeResult(
            data["observations"], data["actions"], int(data["errors"]), done.stdout, True
        )
    except (ValueError, KeyError, TypeError) as exc:
        return ProbeResult([], [], 0, output + f"\nunreadable probe output: {exc}", False)

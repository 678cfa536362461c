"""The rule templates of **synthesis** edits, and rendering them as a ``policy.py``.

Owns the template library (which templates fit which spaces, and what each does),
``features`` (a template's inputs, mirroring the generated code), ``TemplateFit`` (a
template's parameters) and ``render_template``, which writes a self-contained,
stdlib-only ``policy.py``. Fitting parameters to a program's behaviour is in ``fitting``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evopolicygym.agents.edits.constants import FLOOR_FRACTION, format_number, sparse_rate
from evopolicygym.agents.edits.spaces import SpaceInfo

__all__ = [
    "MAX_LINEAR_INPUTS",
    "MAX_TABLE_STATES",
    "TEMPLATE_DESCRIPTIONS",
    "TemplateFit",
    "action_bounds",
    "features",
    "flatten_numbers",
    "is_quadratic",
    "render_template",
    "template_library",
]

# Larger observations (images) get no linear template: too many weights to tune from a budget.
MAX_LINEAR_INPUTS = 64
MAX_TABLE_STATES = 4096


TEMPLATE_DESCRIPTIONS = {
    "linear-threshold": (
        "a linear threshold rule: the second action when w . obs + b > 0, else the first"
    ),
    "quadratic-threshold": "a threshold rule on the observation and its signed squares",
    "linear-argmax": "the argmax of one linear score per action",
    "quadratic-argmax": (
        "the argmax of one score per action, linear in the observation and its signed squares"
    ),
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


def is_quadratic(name: str) -> bool:
    return name.startswith("quadratic-")


def features(name: str, info: SpaceInfo, observation: Any) -> list[float]:
    """The template's inputs for one Box observation (mirrors the generated ``features``)."""
    values = [
        float(v) / s for v, s in zip(flatten_numbers(observation), info.obs_scale, strict=False)
    ]
    if is_quadratic(name):
        values += [v * abs(v) for v in values]
    return values


def flatten_numbers(value: Any) -> list[float]:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [x for item in value for x in flatten_numbers(item)]
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
            rate = 1.0 if rows is not self.table else sparse_rate(len(flat))
            for row in rows:
                for j, value in enumerate(row):
                    if rate >= 1.0 or rng.random() < rate:
                        row[j] = value + sigma * max(abs(value), floor) * rng.gauss(0.0, 1.0)


def action_bounds(info: SpaceInfo) -> tuple[list[float | None], list[float | None]]:
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
    quadratic = is_quadratic(name)
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
                "# One row per state: a preference for each action; the highest wins.\n"
                f"TABLE = {_matrix(fit.table)}\n"
            )
            out.append(
                "\n\nclass TablePolicy:\n"
                "    def act(self, observation):\n"
                "        row = TABLE[int(observation) - OBS_START]\n"
                "        return ACTION_START + max(range(len(row)), key=row.__getitem__)\n"
            )
        else:
            low, high = action_bounds(info)
            out.append(
                f"ACTION_LOW = {_bound_literal(low)}\nACTION_HIGH = {_bound_literal(high)}\n"
            )
            out.append(
                "# One row per state: the action vector to take there.\n"
                f"TABLE = {_matrix(fit.table)}\n"
            )
            out.append(_CLIP_SRC)
            out.append(
                "\n\nclass TablePolicy:\n"
                "    def act(self, observation):\n"
                "        row = TABLE[int(observation) - OBS_START]\n"
                "        action = [clip(v, lo, hi)"
                " for v, lo, hi in zip(row, ACTION_LOW, ACTION_HIGH)]\n" + _action_return(info)
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
            "# One row of weights per action.\n"
            f"WEIGHTS = {_matrix(fit.weights)}\nBIAS = {_literal(fit.bias)}\n"
        )
        body = (
            "\n\nclass LinearArgmax:\n"
            "    def act(self, observation):\n"
            "        x = features(observation)\n"
            "        scores = [b + sum(w * v for w, v in zip(row, x))"
            " for row, b in zip(WEIGHTS, BIAS)]\n"
            "        return ACTION_START + max(range(len(scores)), key=scores.__getitem__)\n"
        )
        policy = "LinearArgmax"
    else:
        low, high = action_bounds(info)
        out.append(f"ACTION_LOW = {_bound_literal(low)}\nACTION_HIGH = {_bound_literal(high)}\n")
        out.append(
            "# One row of weights per action component.\n"
            f"WEIGHTS = {_matrix(fit.weights)}\nBIAS = {_literal(fit.bias)}\n"
        )
        body = _CLIP_SRC + (
            "\n\nclass ClippedLinear:\n"
            "    def act(self, observation):\n"
            "        x = features(observation)\n"
            "        outputs = [b + sum(w * v for w, v in zip(row, x))"
            " for row, b in zip(WEIGHTS, BIAS)]\n"
            "        action = [clip(v, lo, hi)"
            " for v, lo, hi in zip(outputs, ACTION_LOW, ACTION_HIGH)]\n" + _action_return(info)
        )
        policy = "ClippedLinear"
    out.append(_FLATTEN_SRC)
    out.append(_features_src(name))
    out.append(body)
    out.append(f"\n\ndef make_policy(context):\n    return {policy}()\n")
    return "".join(out)

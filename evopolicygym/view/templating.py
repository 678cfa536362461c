"""The viewer's templates (Jinja2, in the package) and the filters they format values with.

Autoescaping is on for every template: whatever a Run holds (program text, Agent messages,
Feedback, file names) reaches the page as text. Figures go into a ``data-spec`` attribute as
JSON (``tojson`` escapes it for HTML) for the page's script to draw: no inline script.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2

from evopolicygym.report.html import fmt

__all__ = ["TEMPLATES", "environment", "when"]

TEMPLATES = Path(__file__).with_name("templates")


def when(ns: int | None) -> str:
    """A recorded time (ns since the epoch) as UTC, to the second."""
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _number(value: object, digits: int = 4) -> str:
    return fmt(value, digits)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _pretty(value: Any) -> str:
    """A value as indented JSON text (shown escaped, in a ``pre``)."""
    return json.dumps(_json_safe(value), indent=2, sort_keys=True, default=str)


def _query(params: dict[str, Any], **changes: Any) -> str:
    """``?`` and the query string of ``params`` with ``changes`` (None drops a key)."""
    merged = {k: v for k, v in {**params, **changes}.items() if v not in (None, "")}
    return "?" + urlencode(merged) if merged else "?"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["num"] = _number
    env.filters["pretty"] = _pretty
    env.globals["query"] = _query
    env.policies["json.dumps_function"] = lambda value, **kw: json.dumps(
        _json_safe(value), allow_nan=False, **kw
    )
    return env

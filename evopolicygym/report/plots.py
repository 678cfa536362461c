"""Figures as plotly specs (plain dicts): ``figure_spec`` makes one JSON-safe spec (data,
layout, config) that the static report and the live viewer both draw; ``figure`` renders a
spec into the report's markup, a ``div`` and a call of ``Plotly.newPlot``; the library
itself is inlined once per page (``plotly_js``).

Specs are dicts, not ``graph_objects``: the report builds many of them and plotly's
validation of each is the slow part; the JSON plotly.js reads is the same.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["PALETTE", "figure", "figure_spec", "plotly_js", "spec_markup"]

# Colours by series, so an agent keeps its colour from one figure to the next.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_CONFIG = {"responsive": True, "displaylogo": False}
_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
    "paper_bgcolor": "#fff",
    "plot_bgcolor": "#fff",
    "xaxis": {"gridcolor": "#e5e8ee", "zeroline": False},
    "yaxis": {"gridcolor": "#e5e8ee", "zeroline": False},
    "legend": {"orientation": "h", "y": -0.2},
}
_MISSING = {"NAType", "NaTType"}  # pandas' missing values, told by name: no pandas import


def plotly_js() -> str:
    """plotly.js, the whole minified library, to inline once in a page."""
    from plotly.offline import get_plotlyjs

    source: str = get_plotlyjs()
    return source


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON data: NaN and infinities as None (JSON has neither; plotly
    leaves a gap), numpy scalars and arrays as Python numbers and lists."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if type(value).__name__ in _MISSING:
        return None
    if hasattr(value, "tolist"):  # a numpy array or scalar
        return _json_safe(value.tolist())
    raise TypeError(f"a figure spec holds JSON data, not {type(value).__name__}")


def figure_spec(
    data: list[dict[str, Any]], layout: dict[str, Any], *, height: int = 360
) -> dict[str, Any]:
    """One figure as JSON data, ``{"data", "layout", "config"}``, for ``Plotly.newPlot``:
    ``layout`` over the shared look (an axis or legend given keeps the look's keys it does
    not set), ``height`` in pixels. ``json.dumps(spec, allow_nan=False)`` holds."""
    merged: dict[str, Any] = {**_LAYOUT, "height": height}
    for key, value in layout.items():  # axes keep the grid unless they say otherwise
        base = merged.get(key)
        merged[key] = (
            {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        )
    return {"data": _json_safe(data), "layout": _json_safe(merged), "config": dict(_CONFIG)}


def spec_markup(div_id: str, spec: dict[str, Any]) -> str:
    """A spec's markup in the report: its container ``div`` (``data-figure`` its id) and the
    script drawing it. Strings in the spec are JSON-escaped by plotly (``<`` and ``/`` as escapes),
    so a label from the record cannot end the script."""
    import plotly.io as pio

    height = spec["layout"].get("height", 360)
    markup: str = pio.to_html(
        {"data": spec["data"], "layout": spec["layout"]},
        config=spec.get("config", _CONFIG),
        include_plotlyjs=False,
        full_html=False,
        validate=False,
        div_id=div_id,
        default_height=f"{height}px",
        default_width="100%",
    )
    return f'<div class="figure" data-figure="{div_id}">{markup}</div>'


def figure(
    div_id: str, data: list[dict[str, Any]], layout: dict[str, Any], *, height: int = 360
) -> str:
    """``spec_markup`` of ``figure_spec(data, layout, height=height)``."""
    return spec_markup(div_id, figure_spec(data, layout, height=height))

"""Figures as plotly specs (plain dicts) rendered into the page: each one a ``div`` and a
call of ``Plotly.newPlot``; the library itself is inlined once per page (``plotly_js``).

Specs are dicts, not ``graph_objects``: the report builds many of them and plotly's
validation of each is the slow part; the JSON plotly.js reads is the same.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PALETTE", "figure", "plotly_js"]

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


def plotly_js() -> str:
    """plotly.js, the whole minified library, to inline once in a page."""
    from plotly.offline import get_plotlyjs

    source: str = get_plotlyjs()
    return source


def figure(
    div_id: str, data: list[dict[str, Any]], layout: dict[str, Any], *, height: int = 360
) -> str:
    """One figure's markup: its container ``div`` (class ``plot``) and the script drawing it.
    Strings in the spec are JSON-escaped by plotly (``<`` and ``/`` as escapes), so a label
    from the record cannot end the script."""
    import plotly.io as pio

    merged: dict[str, Any] = {**_LAYOUT, "height": height}
    for key, value in layout.items():  # axes keep the grid unless they say otherwise
        base = merged.get(key)
        merged[key] = (
            {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
        )
    spec = {"data": data, "layout": merged}
    markup: str = pio.to_html(
        spec,
        config=_CONFIG,
        include_plotlyjs=False,
        full_html=False,
        validate=False,
        div_id=div_id,
        default_height=f"{height}px",
        default_width="100%",
    )
    return f'<div class="figure" data-figure="{div_id}">{markup}</div>'

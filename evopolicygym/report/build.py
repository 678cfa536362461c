"""Building a report: read what it tells of, render its sections, wrap them in one page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evopolicygym.records.location import Store
from evopolicygym.report.html import page
from evopolicygym.report.plots import plotly_js
from evopolicygym.report.run_data import read_run
from evopolicygym.report.run_page import run_sections

__all__ = ["Report", "run_report"]


@dataclass(frozen=True)
class Report:
    html: str
    runs: int  # how many Runs the page tells of


def run_report(
    store: Store, stream_id: str, *, redact: Callable[[str], str], status: str | None = None
) -> Report:
    """The page of the Run of ``stream_id`` (``records.runs.resolve_run`` finds it)."""
    data = read_run(store, stream_id)
    s = data.summary
    title = f"Run {s.run_id}"
    agent = s.agent.name if s.agent is not None else "?"
    subtitle = f"{s.benchmark_id or '?'} · agent {agent} · {status or s.status}"
    return Report(page(title, subtitle, run_sections(data, store, redact, status), plotly_js()), 1)

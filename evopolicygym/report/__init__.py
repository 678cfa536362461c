"""The static HTML report: one self-contained page of a Run or of an experiment.

``run_report`` and ``experiment_report`` return a ``Report`` (its HTML and how many Runs it
tells of); the page inlines its styles, its script and plotly.js (once), so it opens
offline with nothing beside it. Every recorded text (transcripts, programs, errors) passes
``redact`` (the exports' redactor, given by the caller) before it is escaped into the page.
The figures are also there as JSON specs (``report.figures``, ``figure_spec``), for a viewer
that draws them with ``Plotly.newPlot``. Names load on first use: importing the package
alone does not import pandas.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Report": "evopolicygym.report.build",
    "best_so_far_figure": "evopolicygym.report.figures",
    "budget_figure": "evopolicygym.report.figures",
    "compare_figure": "evopolicygym.report.figures",
    "evolution_tree_figure": "evopolicygym.report.figures",
    "experiment_figures": "evopolicygym.report.figures",
    "experiment_report": "evopolicygym.report.build",
    "figure_spec": "evopolicygym.report.plots",
    "plain_label": "evopolicygym.report.figures",
    "run_report": "evopolicygym.report.build",
    "runs_report": "evopolicygym.report.build",
    "submissions_figure": "evopolicygym.report.figures",
    "timeline_figure": "evopolicygym.report.figures",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

"""The static HTML report: one self-contained page of a Run or of an experiment.

``run_report`` and ``experiment_report`` return a ``Report`` (its HTML and how many Runs it
tells of); the page inlines its styles, its script and plotly.js (once), so it opens
offline with nothing beside it. Every recorded text (transcripts, programs, errors) passes
``redact`` (the exports' redactor, given by the caller) before it is escaped into the page.
"""

from __future__ import annotations

from evopolicygym.report.build import Report, experiment_report, run_report, runs_report

__all__ = ["Report", "experiment_report", "run_report", "runs_report"]

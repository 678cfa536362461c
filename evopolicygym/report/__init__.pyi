# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.report.build import Report as Report
from evopolicygym.report.build import experiment_report as experiment_report
from evopolicygym.report.build import run_report as run_report
from evopolicygym.report.build import runs_report as runs_report

__all__ = [
    "Report",
    "experiment_report",
    "run_report",
    "runs_report",
]

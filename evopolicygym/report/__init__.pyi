# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.report.build import Report as Report
from evopolicygym.report.build import experiment_report as experiment_report
from evopolicygym.report.build import run_report as run_report
from evopolicygym.report.build import runs_report as runs_report
from evopolicygym.report.figures import best_so_far_figure as best_so_far_figure
from evopolicygym.report.figures import budget_figure as budget_figure
from evopolicygym.report.figures import compare_figure as compare_figure
from evopolicygym.report.figures import evolution_tree_figure as evolution_tree_figure
from evopolicygym.report.figures import experiment_figures as experiment_figures
from evopolicygym.report.figures import plain_label as plain_label
from evopolicygym.report.figures import submissions_figure as submissions_figure
from evopolicygym.report.figures import timeline_figure as timeline_figure
from evopolicygym.report.plots import figure_spec as figure_spec

__all__ = [
    "Report",
    "best_so_far_figure",
    "budget_figure",
    "compare_figure",
    "evolution_tree_figure",
    "experiment_figures",
    "experiment_report",
    "figure_spec",
    "plain_label",
    "run_report",
    "runs_report",
    "submissions_figure",
    "timeline_figure",
]

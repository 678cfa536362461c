# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym_exporters.base import Exporter as Exporter
from evopolicygym_exporters.base import ExportOptions as ExportOptions
from evopolicygym_exporters.history import RunFilter as RunFilter
from evopolicygym_exporters.history import RunHistory as RunHistory
from evopolicygym_exporters.history import read_histories as read_histories
from evopolicygym_exporters.pipeline import MANIFEST as MANIFEST
from evopolicygym_exporters.pipeline import ExportError as ExportError
from evopolicygym_exporters.pipeline import ExportReport as ExportReport
from evopolicygym_exporters.pipeline import export as export
from evopolicygym_exporters.registry import EXPORTERS as EXPORTERS
from evopolicygym_exporters.rewards import RewardError as RewardError
from evopolicygym_exporters.rewards import reward_function as reward_function
from evopolicygym_exporters.rewards import score_program as score_program

__all__ = [
    "EXPORTERS",
    "MANIFEST",
    "ExportError",
    "ExportOptions",
    "ExportReport",
    "Exporter",
    "RewardError",
    "RunFilter",
    "RunHistory",
    "export",
    "read_histories",
    "reward_function",
    "score_program",
]

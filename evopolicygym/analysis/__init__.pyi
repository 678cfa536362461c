# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.analysis import diagnostics as diagnostics
from evopolicygym.analysis.dataframes import EPISODES_COLUMNS as EPISODES_COLUMNS
from evopolicygym.analysis.dataframes import EVENTS_COLUMNS as EVENTS_COLUMNS
from evopolicygym.analysis.dataframes import MESSAGES_COLUMNS as MESSAGES_COLUMNS
from evopolicygym.analysis.dataframes import RUNS_COLUMNS as RUNS_COLUMNS
from evopolicygym.analysis.dataframes import SUBMISSIONS_COLUMNS as SUBMISSIONS_COLUMNS
from evopolicygym.analysis.dataframes import episodes_df as episodes_df
from evopolicygym.analysis.dataframes import events_df as events_df
from evopolicygym.analysis.dataframes import messages_df as messages_df
from evopolicygym.analysis.dataframes import runs_df as runs_df
from evopolicygym.analysis.dataframes import submissions_df as submissions_df

__all__ = [
    "EPISODES_COLUMNS",
    "EVENTS_COLUMNS",
    "MESSAGES_COLUMNS",
    "RUNS_COLUMNS",
    "SUBMISSIONS_COLUMNS",
    "diagnostics",
    "episodes_df",
    "events_df",
    "messages_df",
    "runs_df",
    "submissions_df",
]

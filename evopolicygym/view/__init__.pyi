# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.view.app import create_app as create_app
from evopolicygym.view.index import RunIndex as RunIndex
from evopolicygym.view.index import default_cache_dir as default_cache_dir

__all__ = [
    "RunIndex",
    "create_app",
    "default_cache_dir",
]

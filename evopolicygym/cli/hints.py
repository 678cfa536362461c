"""Commands the CLI prints for a user to paste: the launcher they used, the store they named,
every argument shell-quoted.

``uv run`` marks the processes it starts with ``UV_RUN_RECURSION_DEPTH``; there the hint
starts ``uv run evopolicy``, else ``evopolicy``. The store is repeated when ``--store`` was
given on the command line (one from ``$EVOPOLICY_STORE`` is found again by the pasted
command in the same shell, so it is left out).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from evopolicygym.cli.options import given_store

__all__ = ["UV_RUN_ENV", "cli_command", "launcher"]

UV_RUN_ENV = "UV_RUN_RECURSION_DEPTH"  # set by `uv run` in the environment of what it runs


def launcher() -> str:
    """How the user started ``evopolicy``, as far as it can be told."""
    return "uv run evopolicy" if os.environ.get(UV_RUN_ENV) else "evopolicy"


def cli_command(
    *args: str | Path, store: str | Path | None = None, takes_store: bool = True
) -> str:
    """``evopolicy ARGS... [--store DIR]`` as a line to paste: with ``store``, else the
    ``--store`` given on this command line; none for a command that ``takes_store`` not."""
    chosen = (store if store is not None else given_store()) if takes_store else None
    words = [str(arg) for arg in args]
    if chosen is not None and str(chosen):
        # A store URL is repeated with its password masked (str of a StoreUrl): a hint is
        # printed, and a password belongs in PGPASSWORD, ~/.pgpass or $EVOPOLICY_STORE.
        shown = str(chosen)
        if "://" in shown:  # only then is the store module worth importing
            from evopolicygym.records.location import StoreUrl, is_store_url

            shown = str(StoreUrl(shown)) if is_store_url(shown) else shown
        words += ["--store", shown]
    return " ".join([launcher(), *(shlex.quote(word) for word in words)])

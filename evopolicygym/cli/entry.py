"""The ``evopolicy`` executable: the console script and ``python -m evopolicygym.cli``."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["session"]:
        # The Agent's submit and finish: served without click when the command line is
        # plain (this call then ends the process), else by the click command below.
        from evopolicygym.cli.session_fastpath import quick

        quick(args[1:])
    from evopolicygym.cli.group import main as group

    group(prog_name="evopolicy")

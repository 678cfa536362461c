"""The ``evopolicy`` command line."""

from evopolicygym.cli.main import main

__all__ = ["main"]

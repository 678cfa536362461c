"""The ``evopolicy`` command line.

``main`` is the click group, imported on first use: ``python -m evopolicygym.cli`` and the
console script start in ``entry``, which serves the Agent's plain session commands
without loading click at all.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from evopolicygym.cli.group import main

__all__ = ["main"]


def __getattr__(name: str) -> object:
    if name == "main":
        from evopolicygym.cli.group import main

        return main
    raise AttributeError(f"module 'evopolicygym.cli' has no attribute {name!r}")

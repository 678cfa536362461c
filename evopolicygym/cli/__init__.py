"""The ``evopolicy`` command line.

``main`` is the click group, imported on first use: ``python -m evopolicygym.cli`` and the
console script start in ``entry``, which serves the Agent's plain session commands
without loading click at all.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "main": "evopolicygym.cli.group",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

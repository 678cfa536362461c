"""The formats ``evopolicy export`` knows, found through the ``evopolicygym.exporters``
entry-point group: this distribution registers its own there, and a third-party package
adds a format the same way (an ``Exporter`` subclass under the name of its config)."""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points

from evopolicygym_exporters.base import Exporter

__all__ = ["EXPORTERS", "GROUP", "load_exporters"]

GROUP = "evopolicygym.exporters"


def load_exporters() -> dict[str, type[Exporter]]:
    """Every registered exporter by format name, in registration order (the first of two
    registrations of a name wins)."""
    found: dict[str, type[Exporter]] = {}
    for entry in entry_points(group=GROUP):
        if entry.name in found:
            continue
        try:
            cls = entry.load()
        except Exception as exc:  # a broken plugin must not take the other formats down
            warnings.warn(
                f"exporter {entry.name} = {entry.value} cannot be loaded: {exc}", stacklevel=2
            )
            continue
        if not (isinstance(cls, type) and issubclass(cls, Exporter)) or cls.name != entry.name:
            warnings.warn(
                f"exporter {entry.name} = {entry.value} is not an Exporter named {entry.name!r}",
                stacklevel=2,
            )
            continue
        found[entry.name] = cls
    return found


EXPORTERS: dict[str, type[Exporter]] = load_exporters()

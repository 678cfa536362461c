"""The formats ``evopolicy export`` knows, found through the ``evopolicygym.exporters``
entry-point group: this distribution registers its own there, and a third-party package
adds a format the same way (an ``Exporter`` subclass under the name of its config)."""

from __future__ import annotations

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
        cls = entry.load()
        if not (isinstance(cls, type) and issubclass(cls, Exporter)) or cls.name != entry.name:
            raise TypeError(f"entry point {entry.name} = {entry.value} is not an Exporter named {entry.name!r}")
        found[entry.name] = cls
    return found


EXPORTERS: dict[str, type[Exporter]] = load_exporters()

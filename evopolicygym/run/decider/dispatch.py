"""How ``decide`` and ``evolve`` find the rule for a command or an event: a table by type.

A table maps each command (or event) struct to the one function that enforces the Run's
rule for it. Looking a type up is one dict access, whatever the table's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["rule_for"]

Rule = TypeVar("Rule")


def rule_for(table: Mapping[type, Rule], cls: type) -> Rule | None:
    """The rule ``table`` holds for ``cls``, else for its nearest base that has one (as an
    ``isinstance`` match would find it); None when there is none."""
    rule = table.get(cls)
    if rule is not None:
        return rule
    # Only a subclass of a command or event gets here (the structs themselves have none).
    for base in cls.__mro__[1:]:
        rule = table.get(base)
        if rule is not None:
            return rule
    return None

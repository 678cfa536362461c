"""Domain-separated seed derivation: every seed in a Run follows from one Run seed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

__all__ = ["derive_seed", "seed_deriver"]

_DOMAIN = b"evopolicygym:seed:v1\x00"


def derive_seed(domain: str, *parts: int | str) -> int:
    """A 63-bit seed from SHA-256 over a domain tag and length-prefixed parts.

    Different domains (``"policy"``, ``"episode"``, ``"pool"`` …) never collide by
    construction, and the encoding is unambiguous, so ``("a", 1)`` and ``("a1",)``
    differ.
    """
    h = hashlib.sha256(_DOMAIN)
    for part in (domain, *parts):
        h.update(_encoded(part))
    return int.from_bytes(h.digest()[:8], "big") >> 1


def seed_deriver(domain: str, *parts: int | str) -> Callable[[int | str], int]:
    """``last -> derive_seed(domain, *parts, last)``, with the common parts hashed once: for
    the many seeds of a plan that differ only in their last part (an Episode's index),
    about three times faster than calling ``derive_seed`` for each."""
    prefix = hashlib.sha256(_DOMAIN)
    for part in (domain, *parts):
        prefix.update(_encoded(part))

    def derive(last: int | str) -> int:
        h = prefix.copy()
        h.update(_encoded(last))
        return int.from_bytes(h.digest()[:8], "big") >> 1

    return derive


def _encoded(part: int | str) -> bytes:
    """One part, typed and length-prefixed, so that no two sequences of parts meet."""
    if isinstance(part, bool) or not isinstance(part, int | str):
        raise TypeError(f"seed parts must be int or str, got {type(part).__name__}")
    raw = part.encode("utf-8") if isinstance(part, str) else str(part).encode("ascii")
    return (b"s" if isinstance(part, str) else b"i") + len(raw).to_bytes(8, "big") + raw

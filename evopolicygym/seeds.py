"""Domain-separated seed derivation: every seed in a Run follows from one Run seed."""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]

_DOMAIN = b"evopolicygym:seed:v1\x00"


def derive_seed(domain: str, *parts: int | str) -> int:
    """A 63-bit seed from SHA-256 over a domain tag and length-prefixed parts.

    Different domains (``"policy"``, ``"episode"``, ``"pool"`` …) never collide by
    construction, and the encoding is unambiguous, so ``("a", 1)`` and ``("a1",)``
    differ.
    """
    h = hashlib.sha256(_DOMAIN)
    for part in (domain, *parts):
        if isinstance(part, bool) or not isinstance(part, int | str):
            raise TypeError(f"seed parts must be int or str, got {type(part).__name__}")
        raw = part.encode("utf-8") if isinstance(part, str) else str(part).encode("ascii")
        h.update((b"s" if isinstance(part, str) else b"i") + len(raw).to_bytes(8, "big") + raw)
    return int.from_bytes(h.digest()[:8], "big") >> 1

"""The Policy ABI: what a submitted ``policy.py`` sees and must provide.

Submitted code defines ``make_policy(context)`` returning an object with
``act(observation) -> action``. One fresh process and one fresh instance per
Episode: state may live across ``act()`` calls, never across Episodes.

This module is a leaf on purpose: it imports only the standard library, so a
policy may import it without pulling in the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Policy", "PolicyContext", "PolicyFactory", "TensorValue"]


@dataclass(frozen=True, slots=True)
class TensorValue:
    """A dense tensor crossing the boundary: NumPy dtype string, shape, raw bytes.

    Inside a policy process tensors arrive as read-only ``numpy.ndarray``; the
    Host sees ``TensorValue`` or arrays. ``data`` is C-ordered, native layout
    of ``dtype`` (for example ``"<f4"``).
    """

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, str) or not self.dtype:
            raise ValueError("tensor dtype must be a non-empty string")
        if not all(isinstance(d, int) and d >= 0 for d in self.shape):
            raise ValueError(f"tensor shape must be non-negative ints, got {self.shape!r}")
        if not isinstance(self.data, bytes):
            raise ValueError("tensor data must be bytes")


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """Everything public a policy may know when it is made.

    ``observation_space`` and ``action_space`` are PolicyValue descriptions
    (dicts such as ``{"type": "discrete", "n": 2, "start": 0}``); ``metadata``
    and ``environment_parameters`` come from the Benchmark's public spec;
    ``policy_seed`` is derived per Episode by the Host, so a policy that wants
    randomness can be reproducible. The global ``random`` and ``numpy.random``
    generators are also seeded from it before ``make_policy`` runs.
    """

    observation_space: Any
    action_space: Any
    policy_seed: int
    metadata: dict[str, Any] = field(default_factory=dict)
    environment_parameters: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    def act(self, observation: Any) -> Any: ...


class PolicyFactory(Protocol):
    def __call__(self, context: PolicyContext) -> Policy: ...

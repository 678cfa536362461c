"""Step traces of recorded Episodes: the blob format the Host writes and exporters read.

A trace blob is msgpack ``{"format": 2, "initial_observation": obs, "steps":
[[action, reward, terminated, truncated, observation], ...]}``, where each
step's observation is the one after its action. Blobs written before the
format had a version are the bare steps list, with no initial observation.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["TRACE_FORMAT", "Trace", "decode_trace", "encode_trace", "plain_hook"]

TRACE_FORMAT = 2


class Trace(msgspec.Struct, frozen=True):
    initial_observation: Any  # None when the blob predates it
    steps: list[tuple[Any, float, bool, bool, Any]]


def plain_hook(value: Any) -> Any:
    """numpy arrays and scalars as plain values; tensors as dtype, shape and bytes."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "data"):
        return {"dtype": value.dtype, "shape": list(value.shape), "data": bytes(value.data)}
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode_trace(initial_observation: Any, steps: list[Any]) -> bytes:
    """``steps`` are objects with action, reward, terminated, truncated and observation."""
    return msgspec.msgpack.encode(
        {
            "format": TRACE_FORMAT,
            "initial_observation": initial_observation,
            "steps": [
                [s.action, s.reward, s.terminated, s.truncated, s.observation] for s in steps
            ],
        },
        enc_hook=plain_hook,
    )


def decode_trace(data: bytes) -> Trace:
    """The trace in a blob of either format; ``ValueError`` for anything else."""
    try:
        raw = msgspec.msgpack.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a trace: {exc}") from exc
    initial: Any = None
    steps: Any = raw
    if isinstance(raw, dict) and raw.get("format") == TRACE_FORMAT:
        initial, steps = raw.get("initial_observation"), raw.get("steps")
    elif not isinstance(raw, list):
        raise ValueError("not a trace: unknown format")
    if not isinstance(steps, list) or not all(isinstance(s, list) and len(s) == 5 for s in steps):
        raise ValueError(
            "not a trace: steps are not [action, reward, terminated, truncated, observation]"
        )
    return Trace(initial, [(s[0], float(s[1]), bool(s[2]), bool(s[3]), s[4]) for s in steps])

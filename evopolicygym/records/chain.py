"""The hash chain: each event's hash covers the previous hash, its envelope and its payload hash."""

from __future__ import annotations

import hashlib

import msgspec

__all__ = ["GENESIS", "chain_hash"]

GENESIS = "0" * 64
_DOMAIN = b"evopolicygym:event:v1\x00"
_encode = msgspec.json.encode


def chain_hash(
    prev_hash: str,
    position: int,
    stream_id: str,
    stream_version: int,
    event_id: str,
    type_name: str,
    schema_version: int,
    recorded_at: int,
    payload_hash: str,
) -> str:
    """sha256 over a domain tag and a JSON array of the fields: unambiguous and cheap."""
    fields = [
        prev_hash,
        position,
        stream_id,
        stream_version,
        event_id,
        type_name,
        schema_version,
        recorded_at,
        payload_hash,
    ]
    return hashlib.sha256(_DOMAIN + _encode(fields)).hexdigest()

"""Parquet shards of one dataset config: explicit features, bounded shards, hashed splits.

Rows arrive one at a time and are written in row groups, so memory holds one
batch per split, never the dataset. ``Json`` leaves are written as canonical
JSON (sorted keys) and the table is cast to the features' Arrow schema, whose
metadata carries the ``datasets.Features``: ``load_dataset`` reads the types
back exactly. A shard is closed once it passes ``max_shard_bytes``; at the end
the shards are named ``<split>-NNNNN-of-MMMMM-<tag>.parquet``, the tag naming
the export's content (``datasets`` keys its cache on the card and the file
name patterns, not on the files' bytes: a new export must change a name, or
``load_dataset`` returns the old rows). A split with no rows
has no shard (``load_dataset`` refuses a split without data), and every shard
of a config has the same schema.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, Json, LargeList, List, Sequence

__all__ = ["SPLITS", "ConfigWriter", "encoder", "split_of"]

SPLITS = ("train", "test")
_SPLIT_DOMAIN = b"evopolicygym:split:v1\x00"
_JSON = msgspec.json.Encoder(order="sorted")

Encode = Callable[[Any], Any]


def split_of(key: str, test_fraction: float) -> str:
    """``test`` for a fixed ``test_fraction`` of keys (Run or task ids), else ``train``."""
    digest = hashlib.sha256(_SPLIT_DOMAIN + key.encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") < test_fraction * 2**64 else "train"


def _json_text(value: Any) -> str | None:
    return None if value is None else _JSON.encode(value).decode()


def encoder(feature: Any) -> Encode:
    """A function turning a row's Python values into what Arrow builds the plain schema from."""
    if isinstance(feature, Json):
        return _json_text
    if isinstance(feature, dict):
        parts = {key: encoder(sub) for key, sub in feature.items()}
        if all(part is _same for part in parts.values()):
            return _same

        def struct(value: Any) -> Any:
            if value is None:
                return None
            return {key: part(value.get(key)) for key, part in parts.items()}

        return struct
    if isinstance(feature, List | LargeList | Sequence):
        inner = encoder(feature.feature)
        if inner is _same:
            return _same
        return lambda value: None if value is None else [inner(v) for v in value]
    return _same


def _same(value: Any) -> Any:
    return value


def _plain(data_type: pa.DataType) -> pa.DataType:
    """The Arrow type with JSON extension types as plain strings (what rows are built as)."""
    if isinstance(data_type, pa.BaseExtensionType):
        return pa.string()
    if pa.types.is_struct(data_type):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in data_type])
    if pa.types.is_large_list(data_type):
        return pa.large_list(_plain(data_type.value_type))
    if pa.types.is_list(data_type):
        return pa.list_(_plain(data_type.value_type))
    return data_type


class _Split:
    def __init__(self, writer: ConfigWriter, name: str) -> None:
        self.writer = writer
        self.name = name
        self.rows: list[dict[str, Any]] = []
        self.pending_bytes = 0
        self.count = 0
        self.shards: list[Path] = []
        self.current: pq.ParquetWriter | None = None
        self.sink: Any = None

    def add(self, row: dict[str, Any], size: int) -> None:
        self.rows.append(row)
        self.pending_bytes += size
        self.count += 1
        if len(self.rows) >= self.writer.batch_rows or self.pending_bytes >= self.writer.batch_bytes:
            self.flush()

    def _open(self) -> pq.ParquetWriter:
        path = self.writer.directory / f"{self.name}-{len(self.shards):05d}.parquet"
        self.shards.append(path)
        self.sink = pa.OSFile(str(path), "wb")
        self.current = pq.ParquetWriter(self.sink, self.writer.schema, compression="zstd")
        return self.current

    def flush(self, final: bool = False) -> None:
        if self.rows:
            table = pa.Table.from_pylist(self.rows, schema=self.writer.plain).cast(self.writer.schema)
            self.rows, self.pending_bytes = [], 0
            (self.current or self._open()).write_table(table)
            if self.sink.tell() >= self.writer.max_shard_bytes:
                self._close_shard()
        if final:
            self._close_shard()

    def _close_shard(self) -> None:
        if self.current is not None:
            self.current.close()
            self.sink.close()
            self.current = None

    def finish(self) -> dict[str, Any]:
        """Close the last shard and give the shards their final names."""
        self.flush(final=True)
        total = len(self.shards)
        names, size = [], 0
        for i, path in enumerate(self.shards):
            name = f"{self.name}-{i:05d}-of-{total:05d}-{self.writer.tag}.parquet"
            size += path.stat().st_size
            os.replace(path, path.with_name(name))
            names.append(name)
        return {"rows": self.count, "bytes": size, "files": names}


class ConfigWriter:
    """Writes one config's rows into ``directory`` as parquet shards per split."""

    def __init__(
        self,
        directory: Path,
        features: Features,
        *,
        tag: str,
        max_shard_bytes: int,
        batch_rows: int = 256,
        batch_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.directory = directory
        self.tag = tag
        self.features = features
        self.schema = features.arrow_schema
        self.plain = pa.schema(
            [pa.field(f.name, _plain(f.type), f.nullable) for f in self.schema],
            metadata=self.schema.metadata,
        )
        self.encode = encoder(dict(features))
        self.max_shard_bytes = max_shard_bytes
        self.batch_rows = batch_rows
        self.batch_bytes = batch_bytes
        self.splits = {name: _Split(self, name) for name in SPLITS}
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, split: str, row: dict[str, Any], size: int = 0) -> None:
        """Add ``row`` to ``split``; ``size`` (an estimate of its bytes) bounds a batch's memory."""
        missing = self.features.keys() - row.keys()
        extra = row.keys() - self.features.keys()
        if missing or extra:
            raise ValueError(f"row columns differ from the features: missing {sorted(missing)}, extra {sorted(extra)}")
        self.splits[split].add(self.encode(row), size)

    def finish(self) -> dict[str, dict[str, Any]]:
        """Close every split; for each, its rows, bytes and shard file names."""
        return {name: split.finish() for name, split in self.splits.items()}

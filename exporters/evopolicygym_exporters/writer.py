"""Parquet shards of one dataset config: explicit features, bounded shards, hashed splits.

Rows arrive one at a time and are written in row groups, so memory holds one
batch per split, never the dataset. ``Json`` leaves are written as canonical
JSON (sorted keys) and the table is cast to the features' Arrow schema, whose
metadata carries the ``datasets.Features``: ``load_dataset`` reads the types
back exactly. A batch (one row group) holds at most an eighth of
``max_shard_bytes`` of encoded rows, and a shard is closed before a batch would
carry it past the limit (judged by the compression seen so far), so shards stay
under it unless a single row is larger; at the end
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
        self.raw_written = 0  # encoded bytes of the rows in closed and open shards
        self.disk_written = 0  # their parquet bytes: together, the compression seen so far
        self.groups = 0  # row groups in the open shard
        self.footer_bytes = 0  # footers of closed shards, and their row groups:
        self.footer_groups = 0  # the footer's cost per row group seen so far
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
        self.current = pq.ParquetWriter(
            self.sink,
            self.writer.schema,
            compression="zstd",
            # Statistics of long text (messages, programs) would bloat every footer and
            # prune nothing: keep them for the flat columns only.
            write_statistics=self.writer.flat_columns,
        )
        self.groups = 0
        return self.current

    def _footer(self, groups: int) -> float:
        """The footer a shard of ``groups`` row groups will need, as seen so far."""
        per_group = self.footer_bytes / self.footer_groups if self.footer_groups else 4096
        return groups * per_group

    def flush(self, final: bool = False) -> None:
        if self.rows:
            limit = self.writer.max_shard_bytes
            ratio = self.disk_written / self.raw_written if self.raw_written else 1.0
            if self.current is not None:
                grown = self.sink.tell() + self.pending_bytes * ratio + self._footer(self.groups + 1)
                if grown > limit:
                    self._close_shard()  # this batch would carry the shard past its limit
            table = pa.Table.from_pylist(self.rows, schema=self.writer.plain).cast(self.writer.schema)
            before = self.sink.tell() if self.current is not None else 0
            (self.current or self._open()).write_table(table)
            self.groups += 1
            self.raw_written += self.pending_bytes
            self.disk_written += self.sink.tell() - before
            self.rows, self.pending_bytes = [], 0
            if self.sink.tell() + self._footer(self.groups) >= limit:
                self._close_shard()
        if final:
            self._close_shard()

    def _close_shard(self) -> None:
        if self.current is not None:
            data_end = self.sink.tell()
            self.current.close()
            self.footer_bytes += self.shards[-1].stat().st_size - data_end
            self.footer_groups += self.groups
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
        self.flat_columns = [
            f.name for f in self.schema if not pa.types.is_nested(f.type) and not isinstance(f.type, pa.BaseExtensionType)
        ]
        self.max_shard_bytes = max_shard_bytes
        self.batch_rows = batch_rows
        # A batch is a row group: small enough that shards end near their limit.
        self.batch_bytes = min(batch_bytes, max_shard_bytes // 8)
        self.splits = {name: _Split(self, name) for name in SPLITS}
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, split: str, row: dict[str, Any]) -> None:
        """Add ``row`` to ``split``; its encoded size bounds a batch's memory and a shard's size."""
        missing = self.features.keys() - row.keys()
        extra = row.keys() - self.features.keys()
        if missing or extra:
            raise ValueError(f"row columns differ from the features: missing {sorted(missing)}, extra {sorted(extra)}")
        encoded = self.encode(row)
        self.splits[split].add(encoded, len(_JSON.encode(encoded)))

    def finish(self) -> dict[str, dict[str, Any]]:
        """Close every split; for each, its rows, bytes and shard file names."""
        return {name: split.finish() for name, split in self.splits.items()}

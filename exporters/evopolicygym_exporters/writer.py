"""Parquet shards of one dataset config: explicit features, bounded shards, hashed splits.

Rows arrive one at a time with their group (the key their split follows: a task or a
Run) and their identity (what makes two rows the same, or None). They are spooled to
disk, and the groups joined by a shared identity form one unit (a union-find over the
keys, held in memory: a short key per row); a unit's split is the one most of its
groups hash to (ties: its least group key's), so the rows of a group, and identical
rows, never straddle splits. Then the spool is read back in arrival order and written in
row groups, so memory holds one batch per split, never the dataset. ``Json`` leaves are
written as canonical JSON (sorted keys) and the table is cast to the features' Arrow schema,
whose
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
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, Json, LargeList, List, Sequence

__all__ = ["SPLITS", "ConfigWriter", "Units", "encoder", "split_of"]

SPLITS = ("train", "test")
_SPLIT_DOMAIN = b"evopolicygym:split:v1\x00"
_JSON = msgspec.json.Encoder(order="sorted")
# The spool's records: (group, encoded size, encoded row).
_SPOOL_ENCODER = msgspec.msgpack.Encoder()
_SPOOL_DECODER = msgspec.msgpack.Decoder()

Encode = Callable[[Any], Any]


def split_of(key: str, test_fraction: float) -> str:
    """``test`` for a fixed ``test_fraction`` of keys (Run or task ids), else ``train``."""
    digest = hashlib.sha256(_SPLIT_DOMAIN + key.encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") < test_fraction * 2**64 else "train"


class Units:
    """Groups joined by the identities their rows share (union-find over keys)."""

    def __init__(self) -> None:
        self.parent: dict[bytes | str, bytes | str] = {}
        self.groups: set[str] = set()

    def _find(self, key: bytes | str) -> bytes | str:
        parent = self.parent
        root = key
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while key != root:  # path compression
            parent[key], key = root, parent[key]
        return root

    def add(self, group: str, identity: bytes | None) -> None:
        self.groups.add(group)
        a = self._find(group)
        if identity is not None:
            b = self._find(identity)
            if a != b:
                self.parent[b] = a

    def assign(self, test_fraction: float) -> dict[str, str]:
        """Each group's split: the one most groups of its unit hash to, ties going to that
        of the unit's least group key (a unit of one group keeps its own). A large unit
        (many tasks sharing a program) thus follows its groups' majority rather than one
        coin, so it cannot carry most rows into ``test``."""
        votes: dict[bytes | str, list[int]] = {}
        least: dict[bytes | str, str] = {}
        for group in sorted(self.groups):
            root = self._find(group)
            least.setdefault(root, group)
            votes.setdefault(root, [0, 0])[split_of(group, test_fraction) == "test"] += 1
        splits = {}
        for root, (train, test) in votes.items():
            splits[root] = (
                "test"
                if test > train
                else "train"
                if train > test
                else split_of(least[root], test_fraction)
            )
        return {group: splits[self._find(group)] for group in self.groups}

    def count(self) -> int:
        """Units holding at least one group."""
        return len({self._find(group) for group in self.groups})


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


def _leaves(types: Any) -> int:
    """The parquet leaf columns of Arrow types (struct fields and list items unfolded)."""
    total = 0
    for data_type in types:
        if isinstance(data_type, pa.BaseExtensionType):
            total += 1
        elif pa.types.is_struct(data_type):
            total += _leaves([field.type for field in data_type])
        elif pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
            total += _leaves([data_type.value_type])
        else:
            total += 1
    return total


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
        if (
            len(self.rows) >= self.writer.batch_rows
            or self.pending_bytes >= self.writer.batch_bytes
        ):
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
        per_group = (
            self.footer_bytes / self.footer_groups
            if self.footer_groups
            else self.writer.footer_guess
        )
        return groups * per_group

    def flush(self, final: bool = False) -> None:
        if self.rows:
            limit = self.writer.max_shard_bytes
            ratio = self.disk_written / self.raw_written if self.raw_written else 1.0
            if self.current is not None:
                grown = (
                    self.sink.tell() + self.pending_bytes * ratio + self._footer(self.groups + 1)
                )
                if grown > limit:
                    self._close_shard()  # this batch would carry the shard past its limit
            table = pa.Table.from_pylist(self.rows, schema=self.writer.plain).cast(
                self.writer.schema
            )
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
    """Writes one config's rows into ``directory`` as parquet shards per split: ``add``
    each row with its group and identity, then ``finish`` assigns the splits and writes."""

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
            f.name
            for f in self.schema
            if not pa.types.is_nested(f.type) and not isinstance(f.type, pa.BaseExtensionType)
        ]
        # Before a shard is closed, a row group's footer cost is guessed from the leaf
        # columns (each has its chunk metadata in every row group's footer entry).
        self.footer_guess = max(4096, 200 * _leaves(self.schema.types))
        self.max_shard_bytes = max_shard_bytes
        self.batch_rows = batch_rows
        # A batch is a row group: small enough that shards end near their limit.
        self.batch_bytes = min(batch_bytes, max_shard_bytes // 8)
        self.splits = {name: _Split(self, name) for name in SPLITS}
        self.units = Units()
        directory.mkdir(parents=True, exist_ok=True)
        self.spool_path = directory / ".rows.spool"
        self.spool: Any = open(self.spool_path, "wb")  # noqa: SIM115 (closed by finish)

    def add(self, group: str, identity: str | None, row: dict[str, Any]) -> None:
        """Spool ``row`` of ``group``; rows of one group, or of one ``identity``, share a split."""
        missing = self.features.keys() - row.keys()
        extra = row.keys() - self.features.keys()
        if missing or extra:
            raise ValueError(
                f"row columns differ from the features: missing {sorted(missing)}, "
                f"extra {sorted(extra)}"
            )
        encoded = self.encode(row)
        # Its encoded size bounds a batch's memory and a shard's size.
        record = _SPOOL_ENCODER.encode((group, len(_JSON.encode(encoded)), encoded))
        self.spool.write(struct.pack("<Q", len(record)))
        self.spool.write(record)
        key = None if identity is None else hashlib.sha256(identity.encode()).digest()[:16]
        self.units.add(group, key)

    def _spooled(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        with open(self.spool_path, "rb") as spool:
            while header := spool.read(8):
                (size,) = struct.unpack("<Q", header)
                group, length, row = _SPOOL_DECODER.decode(spool.read(size))
                yield group, length, row

    def finish(self, test_fraction: float) -> dict[str, dict[str, Any]]:
        """Assign every unit its split, write the rows, close every split; for each split,
        its rows, bytes and shard file names."""
        self.spool.close()
        try:
            splits = self.units.assign(test_fraction)
            for group, length, row in self._spooled():
                self.splits[splits[group]].add(row, length)
        finally:
            self.spool_path.unlink(missing_ok=True)
        return {name: split.finish() for name, split in self.splits.items()}

    def close(self) -> None:
        """Drop the spool of a config that will not be finished."""
        self.spool.close()
        self.spool_path.unlink(missing_ok=True)

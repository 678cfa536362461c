"""Episode pools kept as blobs: a Run's pool, written once when the Run is created, read back.

A pool is Host-private and as long as the Run's budget (up to a million Episodes,
about 100 MB as JSON), so no event carries it: ``put_pool`` stores the entries in
chunks of bounded size, each one blob, then a manifest blob that names the chunks in
order; ``RunCreated.pool_blob`` holds the manifest's digest. The pool is planned once
and stored, never re-planned from the seeds: a Benchmark upgrade must not change the
Episodes behind an index in the middle of a Run.

Reading verifies as it goes: every blob against its digest (the blob store does),
every chunk against the manifest (its count and contiguous indices), the manifest
against the Run's pool size. A pool reads back as it was written or raises
``PoolError``. ``RecordedPool`` reads only the chunks a lookup needs, so a Submission
on a few Episodes of a million-Episode pool reads one chunk, not the pool.

Runs recorded before pools were blobs carry theirs inline in ``RunCreated.pool``;
``RecordedPool.of`` reads either form.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated

import msgspec

from evopolicygym.records.blobcodec import BlobError, BlobMissing
from evopolicygym.records.events import PoolEntry, RunCreated
from evopolicygym.records.store import BlobStore

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_ENTRIES",
    "POOL_FORMAT",
    "PoolError",
    "RecordedPool",
    "pool_problems",
    "put_pool",
    "recorded_pool_size",
]

POOL_FORMAT = "evopolicygym.pool/1"
CHUNK_ENTRIES = 8192  # entries per chunk blob, at most
CHUNK_BYTES = 4 * 1024 * 1024  # encoded bytes per chunk, at most (a chunk always holds one entry)
_CACHED_CHUNKS = 8  # decoded chunks a RecordedPool keeps

_DIGEST = r"^sha256:[0-9a-f]{64}$"


class PoolError(Exception):
    """A recorded pool that cannot be read back as it was written; the message says why.
    ``missing``: a blob of it is not in the store (else one is there but wrong)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


class _Chunk(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    blob: Annotated[str, msgspec.Meta(pattern=_DIGEST)]
    start: Annotated[int, msgspec.Meta(ge=0)]  # the pool index of its first entry
    count: Annotated[int, msgspec.Meta(ge=1)]


class _Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: str
    size: Annotated[int, msgspec.Meta(ge=0)]
    chunks: list[_Chunk]


_ENCODER = msgspec.json.Encoder(order="sorted")
_MANIFEST = msgspec.json.Decoder(_Manifest)
_ENTRIES = msgspec.json.Decoder(list[PoolEntry])


def _encoded_chunks(
    entries: Sequence[PoolEntry], start: int, count: int
) -> Iterator[tuple[int, int, bytes]]:
    """``(start, count, bytes)`` of the chunks covering ``entries[start:start + count]``:
    whole when it fits in ``CHUNK_BYTES``, else halved until each part does (or is one entry)."""
    data = _ENCODER.encode(entries[start : start + count])
    if len(data) <= CHUNK_BYTES or count == 1:
        yield start, count, data
        return
    half = count // 2
    yield from _encoded_chunks(entries, start, half)
    yield from _encoded_chunks(entries, start + half, count - half)


def put_pool(blobs: BlobStore, entries: Sequence[PoolEntry]) -> str:
    """Store ``entries`` (indexed 0..n-1, in order) as chunk blobs and a manifest blob;
    return the manifest's digest. The manifest is written last: once it is stored, so is
    every chunk it names."""
    for i, entry in enumerate(entries):
        if entry.index != i:
            raise ValueError(
                f"pool entry {i} has index {entry.index}: a pool is indexed 0..n-1 in order"
            )
    chunks: list[_Chunk] = []
    for first in range(0, len(entries), CHUNK_ENTRIES):
        count = min(CHUNK_ENTRIES, len(entries) - first)
        for start, size, data in _encoded_chunks(entries, first, count):
            chunks.append(_Chunk(blob=blobs.put(data), start=start, count=size))
    return blobs.put(
        _ENCODER.encode(_Manifest(format=POOL_FORMAT, size=len(entries), chunks=chunks))
    )


def recorded_pool_size(created: RunCreated) -> int | None:
    """The size of the Run's pool as RunCreated records it, without reading the pool: the
    inline pool's length, or the config's pool size for a pool kept as a blob (None if the
    config does not say)."""
    if created.pool_blob is None:
        return len(created.pool)
    size = created.config.get("episode_pool_size")
    return size if isinstance(size, int) and not isinstance(size, bool) else None


class RecordedPool:
    """A Run's recorded pool: its size, and its entries by index, read back as recorded."""

    def __init__(
        self,
        size: int,
        *,
        inline: Sequence[PoolEntry] | None = None,
        blobs: BlobStore | None = None,
        manifest: _Manifest | None = None,
        digest: str | None = None,
    ) -> None:
        self.size = size
        self.digest = digest  # the manifest blob; None for an inline pool
        self._inline = inline
        self._blobs = blobs
        self._chunks = manifest.chunks if manifest is not None else []
        self._starts = [chunk.start for chunk in self._chunks]
        self._cache: OrderedDict[int, list[PoolEntry]] = OrderedDict()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        where = f"blob {self.digest}" if self.digest is not None else "inline"
        return f"RecordedPool({self.size} entries, {where})"

    @classmethod
    def from_entries(cls, entries: Sequence[PoolEntry]) -> RecordedPool:
        """A pool held in memory (as an old RunCreated carries it inline)."""
        return cls(len(entries), inline=entries)

    @classmethod
    def load(cls, blobs: BlobStore, digest: str, size: int | None = None) -> RecordedPool:
        """The pool whose manifest is the blob ``digest``; its manifest is read and checked
        now (against ``size`` too, if given), each chunk when first needed."""
        try:
            raw = blobs.get(digest)
        except BlobError as exc:
            raise PoolError(
                f"the Episode pool cannot be read: {exc}", missing=isinstance(exc, BlobMissing)
            ) from exc
        except ValueError as exc:  # not a digest at all
            raise PoolError(f"the Episode pool's reference is invalid: {exc}") from exc
        try:
            manifest = _MANIFEST.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise PoolError(f"the Episode pool's manifest {digest} is malformed: {exc}") from exc
        if manifest.format != POOL_FORMAT:
            raise PoolError(
                f"the Episode pool's manifest {digest} has unknown format {manifest.format!r}"
            )
        expected = 0
        for chunk in manifest.chunks:
            if chunk.start != expected:
                raise PoolError(
                    f"the Episode pool's manifest {digest} is not contiguous: a chunk starts at "
                    f"index {chunk.start}, not {expected}"
                )
            expected += chunk.count
        if expected != manifest.size:
            raise PoolError(
                f"the Episode pool's manifest {digest} names {expected} entries in its chunks, "
                f"but says it holds {manifest.size}"
            )
        if size is not None and manifest.size != size:
            raise PoolError(
                f"the Episode pool {digest} holds {manifest.size} entries; the Run's pool size is "
                f"{size}"
            )
        return cls(manifest.size, blobs=blobs, manifest=manifest, digest=digest)

    @classmethod
    def of(cls, created: RunCreated, blobs: BlobStore) -> RecordedPool:
        """The pool RunCreated records: read from its blob, or held inline (older Runs)."""
        if created.pool_blob is None:
            return cls.from_entries(created.pool)
        return cls.load(blobs, created.pool_blob, recorded_pool_size(created))

    def entries(self, indices: Iterable[int]) -> list[PoolEntry]:
        """The entries behind ``indices``, in that order; IndexError for one outside the pool."""
        found: list[PoolEntry] = []
        for index in indices:
            if not 0 <= index < self.size:
                raise IndexError(
                    f"Episode index {index} is outside the pool (indices 0..{self.size - 1})"
                )
            if self._inline is not None:
                found.append(self._inline[index])
                continue
            at = bisect.bisect_right(self._starts, index) - 1
            found.append(self._chunk(at)[index - self._starts[at]])
        return found

    def __iter__(self) -> Iterator[PoolEntry]:
        """Every entry in index order, a chunk at a time (the cache is left alone)."""
        if self._inline is not None:
            yield from self._inline
            return
        for at in range(len(self._chunks)):
            yield from self._cache.get(at) or self._read(at)

    def _chunk(self, at: int) -> list[PoolEntry]:
        cached = self._cache.get(at)
        if cached is not None:
            self._cache.move_to_end(at)
            return cached
        entries = self._read(at)
        self._cache[at] = entries
        if len(self._cache) > _CACHED_CHUNKS:
            self._cache.popitem(last=False)
        return entries

    def _read(self, at: int) -> list[PoolEntry]:
        chunk = self._chunks[at]
        assert self._blobs is not None
        where = (
            f"chunk {at} (indices {chunk.start}..{chunk.start + chunk.count - 1}) "
            f"of the Episode pool {self.digest}"
        )
        try:
            entries = _ENTRIES.decode(self._blobs.get(chunk.blob))
        except BlobError as exc:
            raise PoolError(
                f"{where} cannot be read: {exc}", missing=isinstance(exc, BlobMissing)
            ) from exc
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise PoolError(f"{where} is malformed: {exc}") from exc
        if len(entries) != chunk.count:
            raise PoolError(f"{where} holds {len(entries)} entries, not {chunk.count}")
        for offset, entry in enumerate(entries):
            if entry.index != chunk.start + offset:
                raise PoolError(
                    f"{where} holds index {entry.index} where {chunk.start + offset} belongs"
                )
        return entries


def pool_problems(blobs: BlobStore, created: RunCreated) -> list[PoolError]:
    """Why the pool RunCreated names does not read back whole and as the Run says ([] when
    it does, or when the pool is inline): every chunk is read and checked."""
    if created.pool_blob is None:
        return []
    try:
        for _ in RecordedPool.of(created, blobs):
            pass
    except PoolError as exc:
        return [exc]
    return []

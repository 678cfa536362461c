"""The blob codec every blob store shares: digests, the stored encoding, program trees, errors.

A blob's name is ``sha256:<64 lowercase hex>`` of its uncompressed bytes. It is stored as a
marker byte and a body: ``b"Z"`` and a zstd frame that declares its content size, or
``b"R"`` and the bytes as they are (small blobs, and those zstd does not shrink by a tenth).
A Program is stored as its files' blobs plus a tree blob (``program_blobs``) and a mapping
from the program's digest to the tree's, which each backend keeps its own way.

Backends (``blobs.FileBlobStore``, ``pgblobs.PgBlobStore``) store and fetch encoded bytes;
decoding here checks every read against its digest, wherever the bytes came from.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable
from typing import Annotated

import msgspec
import zstandard

from evopolicygym.program import MAX_FILES, MAX_TOTAL_BYTES, Program, ProgramError, program_digest

__all__ = [
    "HEAD_BYTES",
    "MAX_BLOB_BYTES",
    "BlobCorrupt",
    "BlobError",
    "BlobMissing",
    "blob_digest",
    "check_blob_size",
    "check_digest",
    "check_program",
    "decode",
    "decoded_size",
    "encode",
    "is_digest",
    "program_blobs",
    "rebuild_program",
]

MAX_BLOB_BYTES = 256 * 1024 * 1024
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_ZSTD = b"Z"
_RAW = b"R"
_ZSTD_LEVEL = 3
_MIN_COMPRESS = 256
_TREE_FORMAT = "evopolicygym.program-tree/1"
# Longest zstd frame header (magic 4 + descriptor 1 + window 1 + dict id 4 + content size 8).
_ZSTD_MAX_HEADER = 18
HEAD_BYTES = 1 + _ZSTD_MAX_HEADER
"""Leading bytes of an encoded blob that ``decoded_size`` needs."""


class BlobError(Exception):
    """Base class for blob store failures; ``digest`` names the blob or program concerned."""

    digest: str


class BlobMissing(BlobError):
    """No blob (or program) with this digest is stored."""

    def __init__(self, digest: str, kind: str = "blob") -> None:
        self.digest = digest
        self.kind = kind
        super().__init__(f"{kind} {digest} is not in the store")

    def __reduce__(self) -> tuple[type[BlobMissing], tuple[str, str]]:
        return (type(self), (self.digest, self.kind))


class BlobCorrupt(BlobError):
    """A stored blob (or program) does not decode to the content its digest names."""

    def __init__(self, digest: str, reason: str, kind: str = "blob") -> None:
        self.digest = digest
        self.reason = " ".join(reason.split())
        self.kind = kind
        super().__init__(f"{kind} {digest} is corrupt: {self.reason}")

    def __reduce__(self) -> tuple[type[BlobCorrupt], tuple[str, str, str]]:
        return (type(self), (self.digest, self.reason, self.kind))


# -- digests ---------------------------------------------------------------------------------


def is_digest(text: str) -> bool:
    """Whether ``text`` is a digest of the form ``sha256:<64 lowercase hex>``."""
    return _DIGEST_RE.fullmatch(text) is not None


def check_digest(digest: str) -> str:
    """``digest``, or ValueError unless it is one (every backend refuses the same strings)."""
    if not isinstance(digest, str) or _DIGEST_RE.fullmatch(digest) is None:
        raise ValueError(f"{digest!r} is not a digest of the form sha256:<64 lowercase hex>")
    return digest


def blob_digest(data: bytes) -> str:
    """The name of a blob holding ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_blob_size(size: int) -> None:
    """ValueError if a blob of ``size`` bytes is over ``MAX_BLOB_BYTES`` (read at the call:
    one limit for every backend)."""
    if size > MAX_BLOB_BYTES:
        raise ValueError(f"{size} bytes exceeds the {MAX_BLOB_BYTES}-byte blob limit")


# -- the stored encoding ---------------------------------------------------------------------


def encode(data: bytes) -> bytes:
    """``data`` as stored: zstd where it saves a tenth or more, else raw."""
    if len(data) >= _MIN_COMPRESS:
        frame = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_content_size=True).compress(data)
        if 10 * len(frame) <= 9 * len(data):
            return _ZSTD + frame
    return _RAW + data


def _declared_size(digest: str, frame: bytes) -> int:
    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise BlobCorrupt(digest, f"bad zstd frame header ({exc})") from exc
    if declared < 0:
        raise BlobCorrupt(digest, "zstd frame does not declare its content size")
    if declared > MAX_BLOB_BYTES:
        raise BlobCorrupt(
            digest, f"zstd frame declares {declared} bytes, over the {MAX_BLOB_BYTES}-byte limit"
        )
    return declared


def _bad_marker(digest: str, marker: bytes) -> BlobCorrupt:
    if not marker:
        return BlobCorrupt(digest, "file is empty")
    return BlobCorrupt(digest, f"unknown marker byte {marker!r}")


def _unframe(digest: str, stored: bytes) -> bytes:
    marker, body = stored[:1], stored[1:]
    if marker == _RAW:
        return body
    if marker == _ZSTD:
        declared = _declared_size(digest, body)
        try:
            # The frame's declared size was bounded above, and the decoder refuses to exceed it.
            data = zstandard.ZstdDecompressor().decompress(
                body, max_output_size=declared, allow_extra_data=False
            )
        except zstandard.ZstdError as exc:
            raise BlobCorrupt(digest, f"zstd decompression failed ({exc})") from exc
        if len(data) != declared:
            raise BlobCorrupt(digest, f"decoded {len(data)} bytes, frame declares {declared}")
        return data
    raise _bad_marker(digest, marker)


def decode(digest: str, stored: bytes) -> bytes:
    """The bytes blob ``digest`` holds, from its stored form; ``BlobCorrupt`` unless they
    decode and hash to ``digest``."""
    data = _unframe(digest, stored)
    actual = blob_digest(data)
    if actual != digest:
        raise BlobCorrupt(digest, f"content hashes to {actual}")
    return data


def decoded_size(digest: str, head: bytes, length: int) -> int:
    """Uncompressed size of a stored blob of ``length`` bytes, from its first ``HEAD_BYTES``
    (``head``): the raw body's length or the zstd frame's declared size (content unchecked)."""
    marker = head[:1]
    if marker == _RAW:
        return length - 1
    if marker == _ZSTD:
        return _declared_size(digest, head[1:])
    raise _bad_marker(digest, marker)


# -- programs --------------------------------------------------------------------------------


class _TreeEntry(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    blob: Annotated[str, msgspec.Meta(pattern=_DIGEST_PATTERN)]
    size: Annotated[int, msgspec.Meta(ge=0)]


class _Tree(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    entries: list[_TreeEntry]


def check_program(program: Program) -> None:
    """ValueError unless ``program``'s digest is its files' (a store never files a forgery)."""
    if program_digest(program.files) != program.digest:
        raise ValueError(f"program {program.digest} does not match its files")


def program_blobs(program: Program) -> list[bytes]:
    """The blobs that store ``program``: its files' contents, then its tree (last). A store
    puts them all, then maps the program's digest to the tree's: the mapping, written last,
    implies the tree and every file blob are durable."""
    files = sorted(program.files, key=lambda e: e[0].encode("utf-8"))
    entries = [
        _TreeEntry(path=path, blob=blob_digest(data), size=len(data)) for path, data in files
    ]
    tree = msgspec.json.encode(_Tree(format=_TREE_FORMAT, entries=entries), order="sorted")
    return [data for _path, data in files] + [tree]


def _read_tree(digest: str, tree_digest: str, get: Callable[[str], bytes]) -> _Tree:
    try:
        tree = msgspec.json.decode(get(tree_digest), type=_Tree)
    except BlobError as exc:
        raise BlobCorrupt(digest, f"tree {tree_digest}: {exc}", "program") from exc
    except msgspec.DecodeError as exc:
        raise BlobCorrupt(digest, f"tree {tree_digest} is malformed: {exc}", "program") from exc
    if tree.format != _TREE_FORMAT:
        raise BlobCorrupt(digest, f"tree has unknown format {tree.format!r}", "program")
    if len(tree.entries) > MAX_FILES or sum(e.size for e in tree.entries) > MAX_TOTAL_BYTES:
        raise BlobCorrupt(digest, "tree describes more than a program may hold", "program")
    names = [entry.path.encode("utf-8", "surrogatepass") for entry in tree.entries]
    if any(a >= b for a, b in itertools.pairwise(names)):
        raise BlobCorrupt(digest, "tree entries are not strictly sorted by path", "program")
    return tree


def rebuild_program(digest: str, tree_digest: str, get: Callable[[str], bytes]) -> Program:
    """Program ``digest`` from its tree blob ``tree_digest``, reading blobs with ``get`` (a
    store's); ``BlobCorrupt`` unless the files rebuild a program of digest ``digest``."""
    tree = _read_tree(digest, tree_digest, get)
    files: dict[str, bytes] = {}
    for entry in tree.entries:
        try:
            data = get(entry.blob)
        except BlobError as exc:
            raise BlobCorrupt(digest, f"file {entry.path!r}: {exc}", "program") from exc
        if len(data) != entry.size:
            raise BlobCorrupt(
                digest,
                f"file {entry.path!r} has {len(data)} bytes, tree says {entry.size}",
                "program",
            )
        files[entry.path] = data
    try:
        program = Program.from_files(files)
    except ProgramError as exc:
        raise BlobCorrupt(digest, f"tree is not a valid program: {exc}", "program") from exc
    if program.digest != digest:
        raise BlobCorrupt(digest, f"files rebuild program {program.digest}", "program")
    return program

"""PolicyValue: the only values that cross the policy boundary, and their wire codec.

A PolicyValue is None, bool, a 64-bit int, a finite float, str, bytes, a list,
a tuple, a str-keyed dict, or a dense tensor. NumPy arrays become tensors and
NumPy scalars become Python scalars. Everything is bounded: a frame holds at
most ``MAX_FRAME_BYTES``, nesting is at most ``MAX_DEPTH`` deep and a value
holds at most ``MAX_ITEMS`` items.

The codec is MessagePack (msgspec) with two extension types, so tuples stay
tuples and tensors travel as raw bytes rather than nested number lists.
"""

from __future__ import annotations

import math
import struct
import threading
import warnings
from typing import Any

import msgspec
import numpy as np

from evopolicygym.policy import TensorValue

__all__ = [
    "MAX_DEPTH",
    "MAX_FRAME_BYTES",
    "MAX_ITEMS",
    "PolicyValueError",
    "decode_value",
    "encode_value",
    "tensor_from_array",
    "tensor_to_array",
    "to_policy_value",
    "values_equal",
]

MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_ITEMS = 65_536

_EXT_TENSOR = 1
_EXT_TUPLE = 2
_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1
# bool, signed/unsigned ints, floats: the kinds a tensor may carry (no objects, no complex).
_TENSOR_KINDS = frozenset("biuf")
_DIM = struct.Struct("<Q")


class PolicyValueError(ValueError):
    """A value that may not cross the policy boundary; the message names where and why."""


def _check_dtype(dtype: np.dtype[Any], where: str) -> None:
    if dtype.kind not in _TENSOR_KINDS or dtype.hasobject:
        raise PolicyValueError(f"{where}: tensor dtype {dtype.str!r} is not bool, int or float")


def tensor_from_array(array: np.ndarray[Any, Any]) -> TensorValue:
    _check_dtype(array.dtype, "value")
    # Not np.ascontiguousarray unconditionally: it turns a 0-d array into shape (1,).
    contiguous = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    return TensorValue(
        contiguous.dtype.str, tuple(int(d) for d in contiguous.shape), contiguous.tobytes()
    )


def _parse_dtype(name: str) -> np.dtype[Any]:
    try:
        with warnings.catch_warnings():
            # Deprecated aliases ('a') are refused now rather than when numpy drops them.
            warnings.simplefilter("error", DeprecationWarning)
            dtype = np.dtype(name)
    except Exception as exc:  # numpy raises TypeError, ValueError or even SyntaxError
        raise PolicyValueError(f"value: unknown tensor dtype {name!r}") from exc
    _check_dtype(dtype, "value")
    return dtype


def tensor_to_array(tensor: TensorValue, *, writable: bool = True) -> np.ndarray[Any, Any]:
    dtype = _parse_dtype(tensor.dtype)
    if len(tensor.shape) > MAX_DEPTH:
        raise PolicyValueError(
            f"value: tensor has {len(tensor.shape)} dimensions, more than {MAX_DEPTH}"
        )
    buffer: bytes | bytearray = bytearray(tensor.data) if writable else tensor.data
    count = math.prod(tensor.shape)
    if count * dtype.itemsize != len(tensor.data):
        raise PolicyValueError(
            f"tensor of shape {tensor.shape} and dtype {tensor.dtype} needs "
            f"{count * dtype.itemsize} bytes, got {len(tensor.data)}"
        )
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(tensor.shape)


class _Walk:
    """One bounded traversal; counts items across the whole value."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items = 0

    def _count(self, path: str) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise PolicyValueError(f"{path}: value holds more than {MAX_ITEMS} items")

    def normalize(self, value: Any, depth: int, path: str) -> Any:
        """Return the canonical PolicyValue (tensors as TensorValue) or raise."""
        self._count(path)
        kind = type(value)
        if value is None or kind is bool or kind is bytes:
            return value
        if kind is str:
            return _check_str(value, path)
        if kind is int:
            if not _INT_MIN <= value <= _INT_MAX:
                raise PolicyValueError(f"{path}: int {value} is outside the signed 64-bit range")
            return value
        if kind is float:
            if not math.isfinite(value):
                raise PolicyValueError(f"{path}: float {value} is not finite")
            return value
        if kind is TensorValue:
            tensor_to_array(value, writable=False)  # checks dtype and size
            return value
        if isinstance(value, np.ndarray):
            return tensor_from_array(value)
        if isinstance(value, np.generic):
            return (
                self.normalize(value.item(), depth, path)
                if value.dtype.kind in "biuf"
                else _bad(path, value)
            )
        if depth >= MAX_DEPTH and kind in (list, tuple, dict):
            raise PolicyValueError(f"{path}: nesting deeper than {MAX_DEPTH}")
        if kind is list:
            return [self.normalize(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value)]
        if kind is tuple:
            return tuple(self.normalize(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))
        if kind is dict:
            out = {}
            for k, v in value.items():
                if type(k) is not str:
                    raise PolicyValueError(f"{path}: dict key {k!r} is not a str")
                out[_check_str(k, path)] = self.normalize(v, depth + 1, f"{path}[{k!r}]")
            return out
        return _bad(path, value)

    def lower(self, value: Any, depth: int, path: str) -> Any:
        """Validate and turn a value into what msgspec encodes (extensions for tensors, tuples)."""
        self._count(path)
        kind = type(value)
        if value is None or kind is bool or kind is bytes:
            return value
        if kind is str:
            return _check_str(value, path)
        if kind is int:
            if not _INT_MIN <= value <= _INT_MAX:
                raise PolicyValueError(f"{path}: int {value} is outside the signed 64-bit range")
            return value
        if kind is float:
            if not math.isfinite(value):
                raise PolicyValueError(f"{path}: float {value} is not finite")
            return value
        if kind is np.ndarray:
            return _array_ext(value)
        if kind is TensorValue:
            tensor_to_array(value, writable=False)
            return _tensor_ext(value)
        if isinstance(value, np.generic):
            if value.dtype.kind not in "biuf":
                return _bad(path, value)
            return self.lower(value.item(), depth, path)
        if isinstance(value, np.ndarray):
            return _tensor_ext(tensor_from_array(value))
        if depth >= MAX_DEPTH and kind in (list, tuple, dict):
            raise PolicyValueError(f"{path}: nesting deeper than {MAX_DEPTH}")
        if kind is list:
            return [self.lower(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value)]
        if kind is tuple:
            inner = [self.lower(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value)]
            return msgspec.msgpack.Ext(_EXT_TUPLE, _ENCODER.encode(inner))
        if kind is dict:
            out = {}
            for k, v in value.items():
                if type(k) is not str:
                    raise PolicyValueError(f"{path}: dict key {k!r} is not a str")
                out[_check_str(k, path)] = self.lower(v, depth + 1, f"{path}[{k!r}]")
            return out
        return _bad(path, value)


def _bad(path: str, value: Any) -> Any:
    raise PolicyValueError(f"{path}: {type(value).__name__} is not a PolicyValue")


def _check_str(value: str, path: str) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PolicyValueError(f"{path}: str is not valid Unicode (lone surrogate)") from exc
    return value


def _tensor_ext(tensor: TensorValue) -> msgspec.msgpack.Ext:
    dtype = tensor.dtype.encode("ascii")
    header = bytes([len(dtype)]) + dtype + bytes([len(tensor.shape)])
    header += b"".join(_DIM.pack(d) for d in tensor.shape)
    return msgspec.msgpack.Ext(_EXT_TENSOR, header + tensor.data)


_ENCODER = msgspec.msgpack.Encoder()


def to_policy_value(value: Any) -> Any:
    """Validate ``value`` and return its canonical form (arrays become TensorValue)."""
    return _Walk().normalize(value, 0, "value")


_HEADERS: dict[tuple[str, tuple[int, ...]], bytes] = {}


def _array_ext(array: np.ndarray[Any, Any]) -> msgspec.msgpack.Ext:
    """The hot path: an observation or action array straight to its extension."""
    dtype = array.dtype
    if dtype.kind not in _TENSOR_KINDS:
        raise PolicyValueError(f"value: tensor dtype {dtype.str!r} is not bool, int or float")
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    key = (dtype.str, array.shape)
    header = _HEADERS.get(key)
    if header is None:
        name = dtype.str.encode("ascii")
        header = (
            bytes([len(name)])
            + name
            + bytes([array.ndim])
            + b"".join(_DIM.pack(d) for d in array.shape)
        )
        if len(_HEADERS) < 4096:
            _HEADERS[key] = header
    return msgspec.msgpack.Ext(_EXT_TENSOR, header + array.tobytes())


def encode_value(value: Any) -> bytes:
    """Encode a PolicyValue to one bounded wire frame; raises PolicyValueError."""
    kind = type(value)
    if kind is np.ndarray:
        frame = _ENCODER.encode(_array_ext(value))
    elif kind is int and _INT_MIN <= value <= _INT_MAX:
        return _ENCODER.encode(value)
    else:
        frame = _ENCODER.encode(_Walk().lower(value, 0, "value"))
    if len(frame) > MAX_FRAME_BYTES:
        raise PolicyValueError(
            f"value: encoded frame of {len(frame)} bytes exceeds {MAX_FRAME_BYTES}"
        )
    return frame


class _Decoder:
    """A MessagePack decoder whose extension hook rebuilds tensors and tuples, depth-bounded."""

    def __init__(self, arrays: bool, writable: bool) -> None:
        self.arrays = arrays
        self.writable = writable
        self.nesting = 0
        self.inner = msgspec.msgpack.Decoder(ext_hook=self._ext)

    def _ext(self, code: int, data: memoryview) -> Any:
        if code == _EXT_TENSOR:
            if self.arrays:
                return _parse_array(data, self.writable)
            tensor = _parse_tensor(bytes(data))
            tensor_to_array(tensor, writable=False)  # checks dtype, rank and size
            return tensor
        if code == _EXT_TUPLE:
            self.nesting += 1
            try:
                if self.nesting > MAX_DEPTH:
                    raise PolicyValueError(f"value: nesting deeper than {MAX_DEPTH}")
                items = self.inner.decode(data)
            finally:
                self.nesting -= 1
            if type(items) is not list:
                raise PolicyValueError("value: malformed tuple extension")
            return tuple(items)
        raise PolicyValueError(f"value: unknown extension type {code}")


def _parse_tensor(raw: bytes) -> TensorValue:
    try:
        n = raw[0]
        dtype = raw[1 : 1 + n].decode("ascii")
        ndim = raw[1 + n]
        offset = 2 + n
        shape = tuple(_DIM.unpack_from(raw, offset + 8 * i)[0] for i in range(ndim))
        data = raw[offset + 8 * ndim :]
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise PolicyValueError("value: malformed tensor extension") from exc
    _parse_dtype(dtype)
    try:
        return TensorValue(dtype, shape, data)
    except ValueError as exc:
        raise PolicyValueError(f"value: malformed tensor extension ({exc})") from exc


# Decoders carry a nesting counter, so each thread gets its own.
_DECODERS = threading.local()
_LAYOUTS: dict[bytes, tuple[np.dtype[Any], tuple[int, ...], int, int]] = {}


def _parse_array(data: memoryview, writable: bool) -> np.ndarray[Any, Any]:
    """Tensor extension to an array without copying (read-only) or with one copy (writable)."""
    try:
        n = data[0]
        ndim = data[1 + n]
    except IndexError as exc:
        raise PolicyValueError("value: malformed tensor extension") from exc
    offset = 2 + n + 8 * ndim
    key = bytes(data[:offset])
    layout = _LAYOUTS.get(key)
    if layout is None:
        tensor = _parse_tensor(key)
        dtype = _parse_dtype(tensor.dtype)
        if len(tensor.shape) > MAX_DEPTH:
            raise PolicyValueError(
                f"value: tensor has {len(tensor.shape)} dimensions, more than {MAX_DEPTH}"
            )
        count = math.prod(tensor.shape)
        layout = (dtype, tensor.shape, count, count * dtype.itemsize)
        if len(_LAYOUTS) < 4096:
            _LAYOUTS[key] = layout
    dtype, shape, count, nbytes = layout
    if len(data) - offset != nbytes:
        raise PolicyValueError(
            f"value: tensor of shape {shape} and dtype {dtype.str} needs {nbytes} bytes, "
            f"got {len(data) - offset}"
        )
    body = data[offset:]
    array = np.frombuffer(bytearray(body) if writable else body, dtype=dtype, count=count)
    return array.reshape(shape)


def decode_value(frame: bytes | memoryview, *, arrays: bool = True, writable: bool = True) -> Any:
    """Decode and validate one frame. Tensors become NumPy arrays unless ``arrays=False``."""
    if len(frame) == 1 and frame[0] < 0x80:
        return frame[0]  # a positive fixint: the typical discrete action, no decoder needed
    if len(frame) > MAX_FRAME_BYTES:
        raise PolicyValueError(f"value: frame of {len(frame)} bytes exceeds {MAX_FRAME_BYTES}")
    cache: dict[tuple[bool, bool], _Decoder] | None = getattr(_DECODERS, "cache", None)
    if cache is None:
        cache = _DECODERS.cache = {}
    decoder = cache.get((arrays, writable))
    if decoder is None:
        decoder = cache[(arrays, writable)] = _Decoder(arrays, writable)
    try:
        value = decoder.inner.decode(frame)
    except PolicyValueError:
        raise
    except (msgspec.DecodeError, RecursionError, ValueError) as exc:
        raise PolicyValueError(f"value: malformed frame ({exc})") from exc
    kind = type(value)
    if kind is np.ndarray or (kind is int and _INT_MIN <= value <= _INT_MAX):
        return value  # the common observation and action shapes need no walk
    _check_decoded(value, _Walk(), 0)
    return value


_DECODED_SCALARS = frozenset({type(None), bool, str, bytes, np.ndarray, TensorValue})


def _check_decoded(value: Any, walk: _Walk, depth: int) -> None:
    walk.items += 1
    if walk.items > MAX_ITEMS:
        raise PolicyValueError(f"value: value holds more than {MAX_ITEMS} items")
    kind = type(value)
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise PolicyValueError(f"value: int {value} is outside the signed 64-bit range")
    elif kind is float:
        if not math.isfinite(value):
            raise PolicyValueError(f"value: float {value} is not finite")
    elif kind in (list, tuple, dict):
        if depth >= MAX_DEPTH:
            raise PolicyValueError(f"value: nesting deeper than {MAX_DEPTH}")
        if kind is dict:
            for k, v in value.items():
                if type(k) is not str:
                    raise PolicyValueError(f"value: dict key {k!r} is not a str")
                _check_decoded(v, walk, depth + 1)
        else:
            for v in value:
                _check_decoded(v, walk, depth + 1)
    elif kind not in _DECODED_SCALARS:
        # e.g. msgpack's timestamp extension, which msgspec decodes to datetime by itself
        raise PolicyValueError(f"value: {kind.__name__} is not a PolicyValue")


def values_equal(a: Any, b: Any) -> bool:
    """Structural equality that treats arrays and TensorValue by dtype, shape and bytes."""
    if isinstance(a, np.ndarray):
        a = tensor_from_array(a)
    if isinstance(b, np.ndarray):
        b = tensor_from_array(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return bool(a == b)

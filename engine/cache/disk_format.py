"""The prompt cache's file format: one safetensors file per entry.

Layout: `<root>/<namespace key>/<tokens digest>.safetensors`. The safetensors metadata key
"tandem" holds JSON: the format version, the namespace and its fields, the token ids, each layer's
`LayerInfo` and a CRC-32 checksum of the metadata and every tensor.

Everything read from a file is checked against a strict schema before use: a header that is
well-formed JSON of the wrong shape (a list, strings for ints, missing keys) is as corrupt as a
truncated file. Any failure raises `InvalidFile` with the stats key it is counted under.
Tensors are read with numpy straight from the file's bytes (zero-copy views after the checks):
safetensors' own reader holds the GIL for the whole file (0.8 s for 184 MB measured here), which
would stall the engine's thread while a background thread reads.

Nothing here touches MLX; the reader and writer threads call these functions.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError

from engine.cache.layers import STORED_DTYPES, LayerInfo, check_info, layer_trimmable
from engine.cache.namespace import FORMAT_VERSION, CacheNamespace, key_of, tokens_digest

META_KEY = "tandem"
SUFFIX = ".safetensors"
MAX_HEADER_BYTES = 64 << 20
MAX_TOKEN_ID = 1 << 31
READ_CHUNK_BYTES = 8 << 20
# numpy dtype -> safetensors' name for it: one for every dtype a layer stores (STORED_DTYPES)
HEADER_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
HEADER_DTYPES.update({np.dtype(np.uint16): "U16", np.dtype(np.uint32): "U32"})
HEADER_DTYPES[np.dtype(np.int64)] = "I64"
assert {np.dtype(t) for t in STORED_DTYPES.values()} <= set(HEADER_DTYPES)


class InvalidFile(Exception):
    """A stored file that must not be used; `reason` is its stats key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def corrupt(detail: str) -> InvalidFile:
    return InvalidFile("disk-corrupt", detail)


@dataclass(frozen=True)
class TensorSpec:
    dtype: np.dtype
    shape: tuple[int, ...]
    start: int  # byte offsets in the data section
    end: int


@dataclass(frozen=True)
class EntryHeader:
    """A checked file header: everything but the tensors' bytes."""

    ns_key: str
    fields: dict[str, Any]
    tokens: tuple[int, ...]
    target: list[LayerInfo]
    draft: list[LayerInfo] | None
    checksum: str
    tensors: dict[str, TensorSpec]
    data_start: int  # where the data section begins in the file
    meta: dict[str, Any]  # the "tandem" metadata as stored (the checksum covers it)

    @property
    def layers(self) -> list[LayerInfo]:
        return self.target + (self.draft or [])

    @property
    def trimmable(self) -> bool:
        return all(layer_trimmable(i.kind, i.meta) for i in self.layers)


@dataclass
class DiskEntry:
    """An entry file the index knows: what its header says, its size and its last use."""

    ns_key: str
    tokens: tuple[int, ...]
    path: Path
    size: int
    used: float  # last use (the file's mtime): the least recently used goes first
    target_info: list[LayerInfo]
    draft_info: list[LayerInfo] | None
    trimmable: bool

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.tokens, np.int64)  # for fast prefix comparison

    @classmethod
    def of(cls, header: EntryHeader, path: Path, size: int, used: float) -> DiskEntry:
        return cls(
            header.ns_key,
            header.tokens,
            path,
            size,
            used,
            header.target,
            header.draft,
            header.trimmable,
        )


# --- checksums ---


def checksum(meta: dict[str, Any], tensors: dict[str, np.ndarray]) -> str:
    """CRC-32 of the metadata (all but the checksum) and each tensor's name, shape and bytes.
    It finds damage, not tampering, and runs at ~2 GB/s (sha256: 0.25 GB/s on this CPU)."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    crc = zlib.crc32(json.dumps(body, sort_keys=True).encode())
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        crc = zlib.crc32(f"{name}|{a.dtype.str}|{a.shape}|".encode(), crc)
        crc = zlib.crc32(a.reshape(-1).view(np.uint8), crc)
    return f"crc32:{crc:08x}"


# --- writing ---


def entry_metadata(
    ns: CacheNamespace,
    tokens: tuple[int, ...],
    target: list[LayerInfo],
    draft: list[LayerInfo] | None,
    tensors: dict[str, np.ndarray],
) -> dict[str, str]:
    """The safetensors metadata of an entry (checksum included)."""
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "namespace": ns.key(),
        "fields": _json(ns.fields()),
        "tokens": list(tokens),
        "target": [i.to_json() for i in target],
        "draft": None if draft is None else [i.to_json() for i in draft],
    }
    meta["checksum"] = checksum(meta, tensors)
    return {META_KEY: json.dumps(meta)}


def write_file(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Write with safetensors. Its I/O errors arrive as SafetensorError ("I/O error: No space
    left on device (os error 28)"); they are raised here as the OSError they are."""
    try:
        safetensors.numpy.save_file(tensors, str(path), metadata=metadata)
    except SafetensorError as exc:
        error = as_os_error(exc)
        if error is None:
            raise
        raise error from exc


def as_os_error(exc: Exception) -> OSError | None:
    """The operating system error a SafetensorError reports, or None for other failures."""
    found = re.search(r"os error (\d+)", str(exc))
    if found:
        code = int(found.group(1))
        return OSError(code, os.strerror(code))
    if "I/O error" in str(exc) or "IoError" in str(exc):
        return OSError(errno.EIO, str(exc))
    return None


def tensor_names(prefix: str, index: int, info: LayerInfo) -> dict[str, str]:
    """File tensor name -> array name, for one layer ("t3.keys" -> "keys")."""
    return {f"{prefix}{index}.{name}": name for name in info.arrays}


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


# --- reading ---


def open_entry(path: Path) -> BinaryIO:
    """Open a regular file for reading; anything else in its place (a directory, a link, a
    pipe that would block) raises InvalidFile or OSError without being read."""
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise corrupt("not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    f = os.fdopen(os.open(path, flags), "rb")
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise corrupt("not a regular file")
    return f


def read_header(path: Path) -> tuple[EntryHeader, int]:
    """The checked header of an entry file (not its tensors) and the file's size."""
    with open_entry(path) as f:
        st = os.fstat(f.fileno())
        first = f.read(8)
        n = _header_length(first, st.st_size)
        return parse_header(f.read(n), n, st.st_size, path), st.st_size


def read_entry(path: Path, ns: CacheNamespace) -> tuple[EntryHeader, dict[str, np.ndarray]]:
    """The whole entry: header and numpy arrays (views of the bytes read), checksum verified.
    Raises InvalidFile, or OSError when the file cannot be opened."""
    with open_entry(path) as f:
        data = _read_all(f)
    n = _header_length(data[:8].tobytes(), len(data))
    header = parse_header(data[8 : 8 + n].tobytes(), n, len(data), path)
    check_namespace(header, ns)
    arrays = {}
    for name, spec in header.tensors.items():
        start = header.data_start + spec.start
        arrays[name] = (
            data[start : header.data_start + spec.end].view(spec.dtype).reshape(spec.shape)
        )
    if checksum(header.meta, arrays) != header.checksum:
        raise corrupt("checksum mismatch")
    return header, arrays


def _read_all(f: BinaryIO) -> np.ndarray:
    """The whole file, read in chunks into memory nobody has touched yet: Python's `read()`
    holds the GIL while it grows its buffer (60-80 ms for 184 MB here), which would stall the
    engine's thread."""
    size = os.fstat(f.fileno()).st_size
    data = np.empty(size, np.uint8)
    view, at = memoryview(data), 0
    while at < size:
        got = f.readinto(view[at : at + READ_CHUNK_BYTES])
        if not got:
            raise corrupt("the file shrank while it was read")
        at += got
    return data


def check_namespace(header: EntryHeader, ns: CacheNamespace) -> None:
    if header.ns_key != ns.key() or header.fields != _json(ns.fields()):
        raise InvalidFile("disk-foreign", "another model's cache")


def _header_length(first8: bytes, size: int) -> int:
    if len(first8) < 8:
        raise corrupt("truncated file")
    n = int.from_bytes(first8, "little")
    if n > MAX_HEADER_BYTES or 8 + n > size:
        raise corrupt("truncated or corrupt header")
    return n


def parse_header(head: bytes, n: int, size: int, path: Path) -> EntryHeader:
    """Check the header against the schema, the file size and the file's name."""
    try:
        header = json.loads(head)
    except (ValueError, UnicodeDecodeError) as exc:
        raise corrupt(f"unreadable header ({exc})") from None
    header = _dict(header, "header")
    raw_meta = _dict(header.pop("__metadata__", {}), "__metadata__")
    tensors = {name: _tensor_spec(name, spec) for name, spec in header.items()}
    _check_offsets(tensors, size - 8 - n)
    raw = raw_meta.get(META_KEY)
    if raw is None:
        raise InvalidFile("disk-foreign", "not a tandem prompt cache file")
    try:
        meta = _dict(json.loads(_str(raw, "metadata")), "metadata")
    except ValueError as exc:
        raise corrupt(f"unreadable metadata ({exc})") from None
    if meta.get("format_version") != FORMAT_VERSION or type(meta["format_version"]) is not int:
        raise InvalidFile("disk-foreign", f"format version {meta.get('format_version')!r}")
    entry = _entry_header(meta, tensors, 8 + n)
    if entry.ns_key != path.parent.name:
        raise InvalidFile("disk-foreign", "another namespace's cache")
    if tokens_digest(entry.tokens) != path.name.removesuffix(SUFFIX):
        raise corrupt("token ids do not match the file name")
    return entry


def _entry_header(meta: dict, tensors: dict[str, TensorSpec], data_start: int) -> EntryHeader:
    fields = _dict(meta.get("fields"), "fields")
    ns_key = _str(meta.get("namespace"), "namespace")
    if key_of(fields) != ns_key:
        raise corrupt("the namespace does not match its fields")
    tokens = _list(meta.get("tokens"), "tokens")
    if not tokens or not all(type(t) is int and 0 <= t < MAX_TOKEN_ID for t in tokens):
        raise corrupt("bad token ids")
    target = [_layer_info(x) for x in _list(meta.get("target"), "target")]
    draft = None
    if meta.get("draft") is not None:
        draft = [_layer_info(x) for x in _list(meta["draft"], "draft")]
    if not target or draft == []:
        raise corrupt("no layers")
    names: dict[str, tuple[tuple[int, ...], str]] = {}
    for prefix, layers in (("t", target), ("d", draft or [])):
        for i, info in enumerate(layers):
            try:
                check_info(info, len(tokens))
            except ValueError as exc:
                raise corrupt(f"bad layer {prefix}{i} ({exc})") from None
            for file_name, name in tensor_names(prefix, i, info).items():
                names[file_name] = info.arrays[name]
    if set(names) != set(tensors):
        raise corrupt("the tensors do not match the layers")
    for name, (shape, dtype) in names.items():
        spec = tensors[name]
        if spec.shape != shape or spec.dtype != np.dtype(STORED_DTYPES[dtype]):
            raise corrupt(f"tensor {name} is {spec.dtype}{spec.shape}, not {dtype}{shape}")
    checksum_ = _str(meta.get("checksum"), "checksum")
    return EntryHeader(
        ns_key, fields, tuple(tokens), target, draft, checksum_, tensors, data_start, meta
    )


def _layer_info(raw: Any) -> LayerInfo:
    raw = _dict(raw, "layer")
    meta = _dict(raw.get("meta"), "layer state")
    arrays = {}
    for name, spec in _dict(raw.get("arrays"), "layer arrays").items():
        spec = _dict(spec, f"array {name}")
        shape = tuple(_ints(spec.get("shape"), f"shape of {name}"))
        arrays[name] = (shape, _str(spec.get("dtype"), f"dtype of {name}"))
    return LayerInfo(_str(raw.get("kind"), "kind"), meta, arrays)


def _tensor_spec(name: str, raw: Any) -> TensorSpec:
    raw = _dict(raw, f"tensor {name}")
    dtype = _str(raw.get("dtype"), f"dtype of {name}")
    by_name = {v: k for k, v in HEADER_DTYPES.items()}
    if dtype not in by_name:
        raise corrupt(f"tensor {name} has dtype {dtype!r}")
    shape = tuple(_ints(raw.get("shape"), f"shape of {name}"))
    offsets = _ints(raw.get("data_offsets"), f"offsets of {name}")
    if len(offsets) != 2 or offsets[0] > offsets[1]:
        raise corrupt(f"bad offsets of {name}")
    np_dtype = by_name[dtype]
    if offsets[1] - offsets[0] != math.prod(shape) * np_dtype.itemsize:
        raise corrupt(f"tensor {name} does not fit its offsets")
    return TensorSpec(np_dtype, shape, offsets[0], offsets[1])


def _check_offsets(tensors: dict[str, TensorSpec], data_len: int) -> None:
    """The tensors tile the data section exactly (no gaps, overlaps or trailing bytes)."""
    at = 0
    for spec in sorted(tensors.values(), key=lambda s: (s.start, s.end)):
        if spec.start != at:
            raise corrupt("tensor data overlaps or leaves gaps")
        at = spec.end
    if at != data_len:
        raise corrupt("truncated or padded file")


def _dict(value: Any, what: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise corrupt(f"{what} is {type(value).__name__}, not an object")
    return value


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise corrupt(f"{what} is {type(value).__name__}, not a list")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise corrupt(f"{what} is {type(value).__name__}, not a string")
    return value


def _ints(value: Any, what: str) -> list[int]:
    items = _list(value, what)
    if not all(type(v) is int and v >= 0 for v in items):
        raise corrupt(f"{what} holds something other than non-negative integers")
    return items

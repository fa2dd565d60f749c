"""Damaged prompt cache files: whatever is found in place of an entry file (truncated, padded,
a header that is well-formed JSON of the wrong shape, wrong dtypes or shapes, metadata of the
wrong types, a directory, a link, a pipe, an unreadable file) is skipped and removed with one
warning and its reason counted, never counted as an entry, and never raises out of the cache."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from mlx_lm import load as mlx_load

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import CacheNamespace, PromptCache
from tests.engine.prompt_cache_support import LOGGER, NS, files, rand_tokens, stored_entry
from tests.tiny_models import make_tiny_llama_dir, prefill

TOKENS = rand_tokens(14, seed=6)
REASONS = {"disk-corrupt", "disk-foreign"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("llama"))))[0]


@pytest.fixture(scope="module")
def valid(llama, tmp_path_factory) -> Path:
    return stored_entry(tmp_path_factory.mktemp("valid"), llama, TOKENS)


# --- ways to damage a file ---


def split(data: bytes) -> tuple[dict, bytes]:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def join(header, body: bytes) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw + body


def raw(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(change(path.read_bytes()))


def header(edit: Callable[[dict], object], *, replace: bool = False) -> Callable[[Path], None]:
    """Rewrite the JSON header: `edit` changes it in place, or returns its replacement."""

    def damage(path: Path) -> None:
        head, body = split(path.read_bytes())
        out = edit(head)
        path.write_bytes(join(out if replace else head, body))

    return damage


def meta(edit: Callable[[dict], object], *, replace: bool = False) -> Callable[[Path], None]:
    """Rewrite the "tandem" metadata JSON inside the header, like `header`."""

    def edit_header(head: dict) -> None:
        m = json.loads(head["__metadata__"]["tandem"])
        out = edit(m)
        head["__metadata__"]["tandem"] = json.dumps(out if replace else m)

    return header(edit_header)


def first_tensor(head: dict) -> dict:
    return head[next(k for k in head if k != "__metadata__")]


def flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0xFF
    return bytes(b)


def layer(m: dict) -> dict:
    return m["target"][0]


def replace_with_directory(path: Path) -> None:
    path.unlink()
    (path / "inside").mkdir(parents=True)
    (path / "inside" / "data.bin").write_bytes(b"x" * 100)


def replace_with(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        path.unlink()
        make(path)

    return damage


def unreadable(path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path.chmod(0)


DAMAGES: dict[str, Callable[[Path], None]] = {
    # bytes
    "empty": raw(lambda d: b""),
    "four-bytes": raw(lambda d: d[:4]),
    "header-only": raw(lambda d: d[: 8 + int.from_bytes(d[:8], "little")]),
    "truncated-half": raw(lambda d: d[: len(d) // 2]),
    "truncated-one-byte": raw(lambda d: d[:-1]),
    "padded": raw(lambda d: d + b"\0" * 8),
    "huge-header-length": raw(lambda d: (1 << 40).to_bytes(8, "little") + d[8:]),
    "header-not-json": raw(lambda d: join(b"{not json" + b" " * 7, split(d)[1])),
    "header-not-utf8": raw(lambda d: join(b"\xff\xfe\xfd", split(d)[1])),
    "flip-header": raw(lambda d: flip(d, 20)),
    # the header: valid JSON, wrong shape
    "header-list": header(lambda h: [h], replace=True),
    "header-string": header(lambda h: "tandem", replace=True),
    "header-number": header(lambda h: 5, replace=True),
    "tensor-spec-list": header(lambda h: h.update({"t0.keys": [1, 2]})),
    "tensor-dtype-int": header(lambda h: first_tensor(h).update(dtype=5)),
    "tensor-dtype-f64": header(lambda h: first_tensor(h).update(dtype="F64")),
    "tensor-dtype-missing": header(lambda h: first_tensor(h).pop("dtype")),
    "tensor-shape-strings": header(
        lambda h: first_tensor(h).update(shape=[str(x) for x in first_tensor(h)["shape"]])
    ),
    "tensor-shape-wrong": header(lambda h: first_tensor(h)["shape"].reverse()),
    "tensor-offsets-strings": header(lambda h: first_tensor(h).update(data_offsets=["0", "10"])),
    "tensor-offsets-overlap": header(lambda h: first_tensor(h)["data_offsets"].__setitem__(0, 4)),
    "tensor-renamed": header(lambda h: h.update({"t9.keys": h.pop("t0.keys")})),
    "metadata-list": header(lambda h: h.update({"__metadata__": []})),
    "metadata-value-int": header(lambda h: h.update({"__metadata__": {"tandem": 5}})),
    "metadata-missing": header(lambda h: h.update({"__metadata__": {}})),
    # the tandem metadata: valid JSON, wrong shape or types
    "meta-not-json": header(lambda h: h["__metadata__"].update(tandem="{oops")),
    "meta-list": meta(lambda m: [m], replace=True),
    "meta-string": meta(lambda m: "tandem", replace=True),
    "meta-version-string": meta(lambda m: m.update(format_version=str(m["format_version"]))),
    "meta-no-version": meta(lambda m: m.pop("format_version")),
    "meta-no-tokens": meta(lambda m: m.pop("tokens")),
    "meta-no-target": meta(lambda m: m.pop("target")),
    "meta-no-checksum": meta(lambda m: m.pop("checksum")),
    "meta-no-namespace": meta(lambda m: m.pop("namespace")),
    "meta-namespace-int": meta(lambda m: m.update(namespace=5)),
    "meta-fields-list": meta(lambda m: m.update(fields=[1])),
    "meta-fields-changed": meta(lambda m: m["fields"].update(model_id="other")),
    "meta-checksum-int": meta(lambda m: m.update(checksum=5)),
    "tokens-strings": meta(lambda m: m.update(tokens=[str(t) for t in m["tokens"]])),
    "tokens-floats": meta(lambda m: m.update(tokens=[t + 0.5 for t in m["tokens"]])),
    "tokens-negative": meta(lambda m: m["tokens"].__setitem__(0, -1)),
    "tokens-empty": meta(lambda m: m.update(tokens=[])),
    "tokens-dict": meta(lambda m: m.update(tokens={"a": 1})),
    "tokens-changed": meta(lambda m: m["tokens"].__setitem__(0, m["tokens"][0] + 1)),
    "target-dict": meta(lambda m: m.update(target={"0": m["target"][0]})),
    "target-empty": meta(lambda m: m.update(target=[])),
    "target-layer-list": meta(lambda m: m["target"].__setitem__(0, [1])),
    "layer-kind-int": meta(lambda m: layer(m).update(kind=3)),
    "layer-kind-unknown": meta(lambda m: layer(m).update(kind="ArraysCache")),
    "layer-meta-strings": meta(lambda m: layer(m).update(meta={"offset": "14"})),
    "layer-meta-list": meta(lambda m: layer(m).update(meta=[14])),
    "layer-meta-extra-key": meta(lambda m: layer(m)["meta"].update(bits=4)),
    "layer-offset-wrong": meta(lambda m: layer(m)["meta"].update(offset=13)),
    "layer-arrays-list": meta(lambda m: layer(m).update(arrays=[])),
    "layer-array-missing": meta(lambda m: layer(m)["arrays"].pop("values")),
    "layer-dtype-float64": meta(lambda m: layer(m)["arrays"]["keys"].update(dtype="float64")),
    "layer-dtype-int": meta(lambda m: layer(m)["arrays"]["keys"].update(dtype=1)),
    "layer-dtype-not-the-tensors": meta(
        lambda m: layer(m)["arrays"]["keys"].update(dtype="float16")
    ),
    "layer-shape-3d": meta(lambda m: layer(m)["arrays"]["keys"].update(shape=[1, 2, 14])),
    "layer-shape-strings": meta(
        lambda m: layer(m)["arrays"]["keys"].update(shape=["1", "2", "14", "16"])
    ),
    "draft-empty": meta(lambda m: m.update(draft=[])),
    "draft-dict": meta(lambda m: m.update(draft={})),
    # not a file
    "directory": replace_with_directory,
    "symlink-loop": replace_with(lambda p: p.symlink_to(p.name)),
    "dangling-symlink": replace_with(lambda p: p.symlink_to(p.parent / "nowhere")),
    "fifo": replace_with(lambda p: os.mkfifo(p)),
    "unreadable": unreadable,
}


def warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith(LOGGER)]


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_file_is_skipped_removed_and_never_counted(llama, valid, tmp_path, caplog, damage):
    path = tmp_path / NS.key() / valid.name
    path.parent.mkdir()
    shutil.copy(valid, path)
    DAMAGES[damage](path)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    pc = PromptCache(disk_dir=tmp_path)
    assert pc.stats().disk_entries == 0  # found when the index was built
    assert pc.lookup(NS, TOKENS + [1, 2], wait=False) is None
    assert pc.lookup(NS, TOKENS + [1, 2]) is None
    pc.flush()
    assert not os.path.lexists(path)
    assert len(warnings(caplog)) == 1
    s = pc.stats()
    assert sum(s.skipped.values()) == 1 and set(s.skipped) <= REASONS
    assert (s.disk_entries, s.disk_bytes, s.hits, s.misses) == (0, 0, 0, 2)

    pc.publish(NS, TOKENS, prefill(llama, TOKENS))  # the tier still works afterwards
    pc.flush()
    assert len(files(tmp_path)) == 1
    pc.close()


@pytest.mark.parametrize("damage", ["flip-data", "truncated-half", "directory", "tokens-changed"])
def test_file_damaged_after_it_was_indexed_is_removed_when_read(
    llama, valid, tmp_path, caplog, damage
):
    """Tensors and checksums are only read when an entry is restored (on the reader thread)."""
    path = tmp_path / NS.key() / valid.name
    path.parent.mkdir()
    shutil.copy(valid, path)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    pc = PromptCache(disk_dir=tmp_path)
    assert pc.stats().disk_entries == 1
    if damage == "flip-data":
        raw(lambda d: flip(d, len(d) - 40))(path)
    else:
        DAMAGES[damage](path)
    assert pc.lookup(NS, TOKENS + [1, 2]) is None
    assert not os.path.lexists(path)
    assert len(warnings(caplog)) == 1
    s = pc.stats()
    assert s.skipped == {"disk-corrupt": 1} and s.disk_entries == 0
    pc.close()


@pytest.mark.parametrize(
    "other",
    [
        CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-b"),
        CacheNamespace(model_id="another-model", tokenizer_hash="tok-a"),
        CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a", kv_bits=4),
    ],
)
def test_foreign_file_is_skipped_and_removed(llama, tmp_path, caplog, other):
    foreign = stored_entry(tmp_path / "other", llama, TOKENS, other)
    (tmp_path / NS.key()).mkdir()
    path = tmp_path / NS.key() / foreign.name  # the right name, another namespace's content
    shutil.copy(foreign, path)

    caplog.set_level(logging.WARNING, logger=LOGGER)
    pc = PromptCache(disk_dir=tmp_path)
    assert pc.lookup(NS, TOKENS + [1, 2]) is None
    assert not path.exists()
    assert len(warnings(caplog)) == 1
    assert pc.stats().skipped == {"disk-foreign": 1}
    pc.close()

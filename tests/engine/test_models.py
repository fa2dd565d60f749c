"""Resolving, checking, listing and loading model folders (tiny random models built here)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import engine  # noqa: F401  (interposes OpenBLAS before mlx.core loads)

# isort: split
import mlx.core as mx
import mlx.nn as nn
import pytest

from engine import default_model as dm
from engine.model_listing import list_local_models
from engine.models import (
    ModelLoadError,
    check_draft_compatible,
    load_model,
    resolve_model,
)
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        "llama": make_tiny_llama_dir(root / "tiny-llama"),
        "gemma3": make_tiny_gemma3_dir(root / "tiny-gemma3", sliding_window=8),
        "q4": make_tiny_llama_dir(root / "tiny-llama-q4", quantize_bits=4, seed=1),
        "vocab": make_tiny_llama_dir(root / "tiny-llama-vocab", vocab_size=49216, seed=2),
    }


@pytest.fixture(scope="module")
def tiny_llama(tiny_dirs):
    return load_model(str(tiny_dirs["llama"]))


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def _copy_model(src: Path, dst: Path, *, skip: tuple[str, ...] = ()) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*skip))
    return dst


def test_hub_is_offline():
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_load_tiny_llama(tiny_llama, tiny_dirs):
    info = tiny_llama.info
    assert tiny_llama.path == tiny_dirs["llama"].resolve()
    assert info.name == "tiny-llama" and info.path == str(tiny_llama.path)
    assert info.architecture == "llama"
    assert info.vocab_size == 49152 and info.context_length == 2048
    assert info.dtype == "float32" and info.sliding_window is None
    # tied embeddings: 49152*64 + 2 layers * (4 attention + 3 mlp matrices + 2 norms) + final norm
    layer = 64 * 64 * 2 + 64 * 32 * 2 + 64 * 128 * 3 + 64 * 2
    assert info.parameters == 49152 * 64 + 2 * layer + 64
    assert info.bytes == 4 * info.parameters
    ids = tiny_llama.tokenizer.encode("12345 apples")
    assert ids == [33, 34, 35, 36, 37, 13855]  # the default model's tokenizer
    logits = tiny_llama.model(mx.array([ids]))
    assert logits.shape == (1, len(ids), 49152)


def test_load_tiny_gemma3_reports_sliding_window(tiny_dirs):
    loaded = load_model(str(tiny_dirs["gemma3"]))
    assert loaded.info.architecture == "gemma3_text"
    assert loaded.info.sliding_window == 8
    assert loaded.model(mx.array([[1, 2, 3]])).shape == (1, 3, 49152)


def test_load_quantized_tiny_model(tiny_dirs):
    loaded = load_model(str(tiny_dirs["q4"]))
    assert "4-bit" in loaded.info.dtype
    assert any(isinstance(m, nn.QuantizedLinear) for _, m in loaded.model.named_modules())
    assert loaded.info.parameters == load_model(str(tiny_dirs["llama"])).info.parameters
    logits = loaded.model(mx.array([[1, 2, 3]]))
    assert mx.all(mx.isfinite(logits)).item()


def test_load_default_model_through_spec():
    for spec in (None, "default"):
        assert resolve_model(spec) == dm.ensure_default_model()
    seen = []
    loaded = load_model(None, progress=lambda m, f: seen.append(f))
    assert loaded.info.name == dm.DEFAULT_MODEL_NAME
    assert loaded.info.parameters == 134_515_008 and loaded.info.vocab_size == 49152
    assert loaded.info.context_length == 8192 and loaded.info.dtype == dm.default_dtype()
    assert seen[-1] == 1.0 and seen == sorted(seen)


def test_missing_path_names_the_path(tmp_path):
    missing = tmp_path / "no" / "such-model"
    with pytest.raises(ModelLoadError, match="does not exist") as err:
        load_model(str(missing))
    assert str(missing) in str(err.value)


def test_folder_without_config(tmp_path, tiny_dirs):
    folder = _copy_model(tiny_dirs["llama"], tmp_path / "m", skip=("config.json",))
    with pytest.raises(ModelLoadError, match="is not an MLX model folder: config.json is missing"):
        load_model(str(folder))


def test_folder_without_weights(tmp_path, tiny_dirs):
    folder = _copy_model(tiny_dirs["llama"], tmp_path / "m", skip=("*.safetensors", "*.index.json"))
    (folder / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"no model\*\.safetensors") as err:
        resolve_model(str(folder))
    assert "pytorch_model.bin" in str(err.value)


def test_missing_weight_shard(tmp_path, tiny_dirs):
    folder = _copy_model(tiny_dirs["llama"], tmp_path / "m")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["lm_extra"] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match="model-00002-of-00002.safetensors"):
        resolve_model(str(folder))


def test_unknown_model_type(tmp_path, tiny_dirs):
    folder = _copy_model(tiny_dirs["llama"], tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["model_type"] = "tandem_imaginary"
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="'tandem_imaginary' is not supported by mlx-lm"):
        load_model(str(folder))


def test_missing_tokenizer(tmp_path, tiny_dirs):
    folder = _copy_model(tiny_dirs["llama"], tmp_path / "m", skip=("tokenizer*",))
    with pytest.raises(ModelLoadError, match="tokenizer files are missing"):
        load_model(str(folder))


def test_repo_not_in_hf_cache(empty_hf_cache):
    with pytest.raises(ModelLoadError) as err:
        load_model("mlx-community/SmolLM2-135M-Instruct-4bit")
    message = str(err.value)
    assert "not downloaded" in message and "never downloads" in message
    assert "mlx-community/SmolLM2-135M-Instruct-4bit" in message


def _fake_hf_repo(cache: Path, repo_id: str, src: Path) -> Path:
    """The hub cache layout: models--org--name/{refs/main, snapshots/<commit>/files}."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = _copy_model(src, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def test_repo_in_hf_cache_loads_offline(empty_hf_cache, tiny_dirs):
    snapshot = _fake_hf_repo(empty_hf_cache, "tandem-test/tiny-llama", tiny_dirs["llama"])
    assert resolve_model("tandem-test/tiny-llama") == snapshot
    loaded = load_model("tandem-test/tiny-llama")
    assert loaded.info.name == "tandem-test/tiny-llama"
    assert loaded.path == snapshot


def test_list_local_models(empty_hf_cache, tmp_path, tiny_dirs):
    _fake_hf_repo(empty_hf_cache, "tandem-test/tiny-gemma3", tiny_dirs["gemma3"])
    broken = tmp_path / "extra" / "broken"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{}")
    _fake_hf_repo(empty_hf_cache, "tandem-test/broken", broken)  # no weights: not listed
    _copy_model(tiny_dirs["q4"], tmp_path / "extra" / "tiny-q4")

    entries = list_local_models([tiny_dirs["llama"], tmp_path / "extra", tmp_path / "missing"])
    by_source = {}
    for e in entries:
        by_source.setdefault(e.source, []).append(e)
    assert [e.spec for e in by_source["default"]] == ["default"]
    assert by_source["default"][0].name == dm.DEFAULT_MODEL_NAME
    assert [e.name for e in by_source["hf-cache"]] == ["tandem-test/tiny-gemma3"]
    assert sorted(e.name for e in by_source["folder"]) == ["tiny-llama", "tiny-q4"]
    for e in entries:
        assert e.size_bytes > 0
        if e.source != "default":
            assert resolve_model(e.spec).resolve() == e.path.resolve()


def _shuffled_tokenizer_dir(src: Path, dst: Path) -> Path:
    """Same size, different vocabulary: two tokens swap ids."""
    folder = _copy_model(src, dst)
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    vocab["hello"], vocab["Ġworld"] = vocab["Ġworld"], vocab["hello"]
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    return folder


def test_check_draft_compatible(tiny_llama, tiny_dirs, tmp_path):
    same_vocab = load_model(str(tiny_dirs["gemma3"]))
    check_draft_compatible(tiny_llama, same_vocab)  # same tokenizer: fine

    other_size = load_model(str(tiny_dirs["vocab"]))
    with pytest.raises(ModelLoadError) as err:
        check_draft_compatible(tiny_llama, other_size)
    assert "tiny-llama" in str(err.value) and "tiny-llama-vocab" in str(err.value)

    swapped = load_model(str(_shuffled_tokenizer_dir(tiny_dirs["llama"], tmp_path / "swapped")))
    with pytest.raises(ModelLoadError, match="different tokenizers"):
        check_draft_compatible(tiny_llama, swapped)

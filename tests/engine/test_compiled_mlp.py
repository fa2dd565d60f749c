"""Dense MLPs compiled for few-row calls (engine/compiled_mlp.py): the same logits bit for bit
as the MLP run as it is, the same parameters and names, wide calls left uncompiled, mixtures of
experts left alone, and the engine still exact against mlx_lm.generate with it on."""

from __future__ import annotations

import asyncio
import logging

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from engine import compiled_mlp
from engine.compiled_mlp import DISABLE_ENV, ENABLE_ENV, compile_mlps, is_compiled, set_compiled
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model
from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.layer_shapes_support import PROMPTS, decode_logits, make_layout_folders
from tests.engine.test_exactness import make_prompts, reference_tokens, run_engine


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return make_layout_folders(tmp_path_factory.mktemp("compiled_mlp"))


@pytest.fixture(autouse=True)
def switched_on():
    set_compiled(True)
    yield
    set_compiled(True)


def test_off_the_gpu_unless_asked(folders, monkeypatch):
    monkeypatch.delenv(ENABLE_ENV, raising=False)
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.setattr(compiled_mlp, "on_cuda", lambda: False)
    model = load_model(str(folders["llama"])).model
    assert compile_mlps(model) == 0
    assert not any(is_compiled(m) for _, m in model.named_modules())
    monkeypatch.setenv(ENABLE_ENV, "1")
    assert compile_mlps(model) == len(model.layers)


def test_on_a_cuda_gpu_unless_turned_off(folders, monkeypatch):
    monkeypatch.delenv(ENABLE_ENV, raising=False)
    monkeypatch.setattr(compiled_mlp, "on_cuda", lambda: True)
    monkeypatch.setenv(DISABLE_ENV, "1")
    model = load_model(str(folders["llama"])).model
    assert compile_mlps(model) == 0
    monkeypatch.delenv(DISABLE_ENV)
    assert compile_mlps(model) == len(model.layers)
    assert compile_mlps(model) == 0  # wrapped once only


@pytest.mark.parametrize("name", ["llama", "llama-4bit", "qwen2-bias", "gemma3"])
def test_same_logits_bit_for_bit(folders, name):
    model = load_model(str(folders[name])).model
    before = dict(tree_flatten(model.parameters()))
    assert compile_mlps(model, force=True) == len(model.layers)
    after = dict(tree_flatten(model.parameters()))
    assert after.keys() == before.keys()  # names unchanged: loading and copying weights work
    assert all(after[k] is before[k] for k in before)
    set_compiled(False)
    plain = decode_logits(model, PROMPTS)
    set_compiled(True)
    compiled = decode_logits(model, PROMPTS)
    for a, b in zip(plain, compiled, strict=True):
        assert mx.array_equal(a, b).item()


def test_mixture_of_experts_left_alone(folders):
    model = load_model(str(folders["qwen3_next"])).model
    assert compile_mlps(model, force=True) == 0
    assert all("switch_mlp" in layer.mlp for layer in model.layers)  # every MLP routes experts
    assert not any(is_compiled(m) for _, m in model.named_modules())


def test_wide_calls_run_as_they_are(folders):
    model = load_model(str(folders["llama"])).model
    compile_mlps(model, force=True, max_rows=4)
    mlp = model.layers[0].mlp
    calls = []
    traced = mlp._tandem_compiled.fn
    mlp._tandem_compiled.fn = lambda x: calls.append(x.shape) or traced(x)
    dim = model.args.hidden_size
    mlp(mx.zeros((2, 8, dim)))  # a prefill of 16 rows
    mlp(mx.zeros((2, 2, dim)))  # a verify forward of 4
    assert calls == [(2, 2, dim)]


def test_a_failing_trace_keeps_the_mlp_as_it_is(folders, caplog):
    model = load_model(str(folders["llama"])).model
    compile_mlps(model, force=True)
    mlp = model.layers[0].mlp

    def broken(x):
        raise ValueError("cannot trace this")

    mlp._tandem_compiled.fn = broken
    x = mx.ones((1, 1, model.args.hidden_size))
    set_compiled(False)
    want = mlp(x)
    set_compiled(True)
    assert mx.array_equal(mlp(x), want).item()
    assert mlp._tandem_compiled.failed
    assert "runs uncompiled" in caplog.text


def test_engine_exact_with_compiled_mlps(folders, monkeypatch, caplog):
    monkeypatch.setenv(ENABLE_ENV, "1")
    caplog.set_level(logging.INFO, logger="engine.compiled_mlp")
    folder = folders["llama"]
    prompts = make_prompts(4, vocab=49152, seed=7, max_len=30)
    want = reference_tokens(folder, prompts, 12)
    specs = [
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4),
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2),
    ]
    got = asyncio.run(run_engine(folder, prompts, 12, stagger=True, specs=specs))
    assert got == want
    assert "MLPs compiled" in caplog.text


def test_baselines_run_uncompiled(folders):
    model = load_model(str(folders["llama"])).model
    compile_mlps(model, force=True)
    mlp = model.layers[0].mlp
    calls = []
    traced = mlp._tandem_compiled.fn
    mlp._tandem_compiled.fn = lambda x: calls.append(x.shape) or traced(x)
    x = mx.ones((1, 1, model.args.hidden_size))
    with mlx_as_shipped():
        mlp(x)
    assert calls == []
    mlp(x)  # and compiled again after
    assert calls == [x.shape]

"""Sibling projections fused into one matmul (engine/fused_projections.py): the same greedy
tokens as mlx-lm's separate ones and logits within float rounding (OpenBLAS, Tandem's Linux CPU
BLAS, rounds a wide product's columns differently, as it does a batch's rows), the same
parameters, and a safe fallback where siblings turn out not to share their input."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm import load as mlx_load
from mlx_lm.utils import get_total_parameters

from engine.fused_projections import (
    DISABLE_ENV,
    FusedProjection,
    ProjectionPart,
    fuse_projections,
    fused_groups,
    separate_projections,
)
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model
from tests.engine.layer_shapes_support import PROMPTS, decode_logits, make_layout_folders
from tests.tiny_models import tiny_llama

ROUNDING = dict(rtol=1e-4, atol=1e-4)  # float32 sums in another order, through a few layers


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return make_layout_folders(tmp_path_factory.mktemp("fused"))


def _same(want: list[mx.array], got: list[mx.array]) -> bool:
    """Equal greedy tokens at every position, logits within float rounding."""
    return all(
        mx.array_equal(mx.argmax(a, axis=-1), mx.argmax(b, axis=-1)).item()
        and mx.allclose(a, b, **ROUNDING).item()
        for a, b in zip(want, got)
    )


@pytest.mark.parametrize("name", ["llama", "llama-4bit", "qwen2-bias", "gemma3", "qwen3_next"])
def test_fused_logits_match_mlx_lm(folders, name):
    reference, _ = mlx_load(str(folders[name]))
    loaded = load_model(str(folders[name]))
    groups = fused_groups(loaded.model)
    assert groups and all(g.sharing for g in groups)
    want = decode_logits(reference, PROMPTS)
    got = decode_logits(loaded.model, PROMPTS)
    assert _same(want, got)
    assert all(g.sharing for g in groups)  # every sibling read the one product


def test_every_attention_and_mlp_group_is_fused(folders):
    model = load_model(str(folders["llama"])).model
    layer = model.model.layers[0]
    for name in ("q_proj", "k_proj", "v_proj"):
        assert isinstance(layer.self_attn[name], ProjectionPart)
    for name in ("gate_proj", "up_proj"):
        assert isinstance(layer.mlp[name], ProjectionPart)
    assert isinstance(layer.self_attn.o_proj, nn.Linear)  # another input: left alone
    assert len(fused_groups(model)) == 2 * len(model.model.layers)


@pytest.mark.parametrize("name", ["llama", "llama-4bit", "qwen2-bias"])
def test_parameters_are_counted_once_and_in_full(folders, name):
    reference, _ = mlx_load(str(folders[name]))
    model = load_model(str(folders[name])).model
    assert get_total_parameters(model) == get_total_parameters(reference)
    size = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    assert size == sum(v.nbytes for _, v in tree_flatten(reference.parameters()))


class _TwoInputs(nn.Module):
    """A block whose "siblings" take different inputs: fusing them can only cost time."""

    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(16, 8, bias=False)
        self.k_proj = nn.Linear(16, 4, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        return mx.concatenate([self.q_proj(x), self.k_proj(x * 2.0)], axis=-1)


def test_siblings_on_different_inputs_stay_right_and_stop_sharing():
    mx.random.seed(3)
    block = _TwoInputs()
    mx.eval(block.parameters())
    x = mx.random.normal((2, 3, 16))
    want = block(x)
    assert fuse_projections(block) == 1
    (group,) = fused_groups(block)
    for _ in range(5):
        assert mx.array_equal(block(x), want).item()
    assert not group.sharing  # it stopped computing rows nobody reads
    assert mx.array_equal(block(x), want).item()


def test_a_part_called_twice_on_one_input_computes_again():
    mx.random.seed(4)
    block = _TwoInputs()
    mx.eval(block.parameters())
    x = mx.random.normal((1, 2, 16))
    want = (block.q_proj(x), block.k_proj(x))
    fuse_projections(block)
    first = block.q_proj(x)
    again = block.q_proj(x)  # before k_proj read the product
    assert mx.array_equal(first, want[0]).item() and mx.array_equal(again, want[0]).item()
    assert mx.array_equal(block.k_proj(x), want[1]).item()


def test_separate_projections_compute_each_sibling_alone(folders):
    model = load_model(str(folders["llama"])).model
    fused = decode_logits(model, PROMPTS)
    calls = []
    original = FusedProjection._multiply

    def counting(self, x, params):
        calls.append(params["weight"] is self["weight"])  # the whole group's product
        return original(self, x, params)

    FusedProjection._multiply = counting
    try:
        with separate_projections():
            apart = decode_logits(model, PROMPTS, steps=1)
        with mlx_as_shipped():  # the benchmarks' baselines: apart as well
            model(mx.array(PROMPTS))
    finally:
        FusedProjection._multiply = original
    assert calls and not any(calls)  # each sibling from its own rows, never the one product
    assert _same(fused[:2], apart[:2])


def test_the_environment_switch_keeps_mlx_lm_s_model(folders, monkeypatch):
    monkeypatch.setenv(DISABLE_ENV, "1")
    model = load_model(str(folders["llama"])).model
    assert not fused_groups(model)
    assert isinstance(model.model.layers[0].self_attn.q_proj, nn.Linear)


def test_interleaved_inputs_never_read_each_other_s_product():
    """Two forwards' calls interleaved (as two callers would): every result is its own x's."""
    mx.random.seed(5)
    block = _TwoInputs()
    mx.eval(block.parameters())
    xa, xb = mx.random.normal((1, 2, 16)), mx.random.normal((1, 2, 16))
    want = {
        "qa": block.q_proj(xa),
        "qb": block.q_proj(xb),
        "ka": block.k_proj(xa),
        "kb": block.k_proj(xb),
    }
    fuse_projections(block)
    got = {
        "qa": block.q_proj(xa),
        "qb": block.q_proj(xb),
        "ka": block.k_proj(xa),
        "kb": block.k_proj(xb),
    }
    assert all(mx.array_equal(got[k], want[k]).item() for k in want)


def _mixed_precision_llama() -> nn.Module:
    """A tiny llama quantized at 4 bits but for its value projections at 8 (as mixed recipes)."""
    mx.random.seed(7)
    model = tiny_llama(vocab_size=256)
    nn.quantize(
        model,
        group_size=32,
        bits=4,
        class_predicate=lambda path, m: (
            {"group_size": 32, "bits": 8} if path.endswith("v_proj") else hasattr(m, "to_quantized")
        ),
    )
    mx.eval(model.parameters())
    return model


def test_a_mixed_precision_group_fuses_its_alike_members_only():
    reference, model = _mixed_precision_llama(), _mixed_precision_llama()
    fuse_projections(model)
    attention = model.model.layers[0].self_attn
    assert isinstance(attention.q_proj, ProjectionPart)
    assert isinstance(attention.k_proj, ProjectionPart)
    assert isinstance(attention.v_proj, nn.QuantizedLinear) and attention.v_proj.bits == 8
    prompts = [[p % 256 for p in prompt] for prompt in PROMPTS]
    assert _same(decode_logits(reference, prompts), decode_logits(model, prompts))

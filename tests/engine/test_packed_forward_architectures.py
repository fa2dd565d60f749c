"""Which architectures let prompt chunks share the decoding rows' forward: the check at load
(engine/core/packed_forward.py, `enable`) on every architecture the matrix builds. With sharing
on, the engine's matrix (test_architecture_matrix.py, its late joins) holds every reply to
mlx_lm.generate's. A model refused here keeps separate forwards; each refusal names why, so a
change in mlx-lm or in the check shows up as a failure here."""

from __future__ import annotations

import pytest

from engine.core.packed_forward import enable, supported
from tests.architectures.build import build_model
from tests.architectures.catalog import BY_NAME

# architecture -> a phrase of why the check refuses it
REFUSED = {
    "afm7": "keys_and_values",  # its attention reads a cache attribute of its own
    "baichuan_m1": "not subscriptable",  # the layer indexes its cache
    "bailing_hybrid": "offset",  # the model reads its caches' offset
    "bailing_moe_linear": "offset",
    "deepseek_v32": "not subscriptable",
    "deepseek_v41": "merge",  # caches mlx-lm cannot batch
    "falcon_h1": "not subscriptable",
    "gemma3n": "offset",
    "gemma4": "one vector per position",  # its attention returns a tuple
    "gemma4_text": "one vector per position",
    "glm_moe_dsa": "not subscriptable",
    "gpt2": "offset",  # absolute positions
    "gpt_bigcode": "length-1 arrays",
    "hunyuan": "one vector per position",
    "iquestloopcoder": "no layer module takes a cache",
    "llama4": "merge",
    "longcat_flash": "not subscriptable",
    "longcat_flash_ngram": "broadcast",
    "minimax_m3_vl": "not subscriptable",
    "ministral3": "offset",
    "mistral4": "offset",
    "plamo": "scaled_dot_product_attention",  # the model's mask reaches attention as it is
    "rwkv7": "one vector per position",
}

BUILT = sorted(name for name, arch in BY_NAME.items() if not arch.unbuildable)


def test_every_refusal_is_an_architecture_the_matrix_builds():
    assert sorted(set(REFUSED) - set(BUILT)) == []


@pytest.mark.parametrize("name", BUILT)
def test_the_check_decides_sharing_per_architecture(name):
    model, _ = build_model(BY_NAME[name])
    problem = enable(model)
    if name in REFUSED:
        assert problem is not None and REFUSED[name] in problem, problem
        assert not supported(model)
    else:
        assert problem is None, problem
        assert supported(model)

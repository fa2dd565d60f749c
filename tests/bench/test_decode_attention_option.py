"""`python -m engine.bench --decode-attention`: the engine's EngineConfig.decode_attention_kernel
for a ragged plain step's attention on CUDA, the kernel unless asked otherwise."""

from __future__ import annotations

import pytest

from engine.bench.__main__ import parse_args
from engine.bench.spec_configs import DECODE_ATTENTION
from engine.config import DEFAULT_DECODE_ATTENTION_KERNEL, EngineConfig


def test_each_way_maps_to_the_engines_setting():
    assert DECODE_ATTENTION[parse_args([]).decode_attention] is DEFAULT_DECODE_ATTENTION_KERNEL
    assert EngineConfig().decode_attention_kernel is DEFAULT_DECODE_ATTENTION_KERNEL
    for name, value in (("kernel", True), ("mlx", False), ("measured", None)):
        assert DECODE_ATTENTION[parse_args(["--decode-attention", name]).decode_attention] is value


def test_another_way_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--decode-attention", "cudnn"])
    assert exit_.value.code == 2
    assert "--decode-attention" in capsys.readouterr().err

"""The CUDA skinny-matmul kernel's Python side, on the CPU: which matmuls it takes, the drop-in
`nn.Linear` / `nn.Embedding.as_linear` routing (with the kernel stood in for by MLX's own
matmul), install and the environment switch, the benchmark's "as shipped" baselines, and the
source MLX compiles. Its numbers are checked on a CUDA machine by engine/bench/matmul_check.py."""

import mlx.core as mx
import mlx.nn as nn
import pytest

from engine.kernels import as_shipped
from engine.kernels import skinny_matmul_cuda as smc
from engine.kernels import verify_attention_cuda as vac
from tests.tiny_models import tiny_llama

ONLY_CPU = pytest.mark.skipif(mx.cuda.is_available(), reason="checks the CPU behaviour")


def operands(rows=4, k=64, n=32, dtype=mx.bfloat16, lead=()):
    x = mx.random.normal((*lead, rows, k), key=mx.random.key(1)).astype(dtype)
    w = mx.random.normal((n, k), key=mx.random.key(2)).astype(dtype)
    return x, w


@pytest.mark.parametrize("rows", [2, 5, 16])
def test_it_takes_a_few_rows(rows):
    assert smc.takes(*operands(rows=rows))


def test_it_counts_rows_over_every_leading_axis():
    """[batch, tokens, hidden]: a verify forward of 2 rows x 5 tokens is 10 rows of x."""
    assert smc.takes(*operands(rows=5, lead=(2,)))
    assert not smc.takes(*operands(rows=5, lead=(4,)))  # 20


@pytest.mark.parametrize(
    "x, w",
    [
        operands(rows=1),  # MLX's own matrix-vector kernel
        operands(rows=17),  # tensor cores win
        (operands()[0], operands()[1].astype(mx.float16)),  # mixed dtypes
        operands(k=60),  # not whole 16-byte vectors
        (operands()[0].astype(mx.int32), operands()[1].astype(mx.int32)),
        (operands()[0], operands()[1][None]),  # not a plain 2-D weight
        (operands(k=32)[0], operands(k=64)[1]),  # widths differ: MLX raises its own error
    ],
)
def test_it_leaves_every_other_matmul_to_mlx(x, w):
    assert not smc.takes(x, w)


@pytest.fixture
def routed(monkeypatch):
    """The routing as on CUDA, with MLX's matmul standing in for the kernel; the calls it made."""
    calls = []

    def stand_in(x, w, **kwargs):
        calls.append(tuple(x.shape))
        return x @ w.T

    monkeypatch.setattr(smc, "on_cuda", lambda: True)
    monkeypatch.setattr(smc, "skinny_matmul", stand_in)
    smc.install(force=True)
    yield calls
    smc.uninstall()


def test_a_linear_layer_gives_what_it_gives_without_the_kernel(routed):
    layer = nn.Linear(64, 48, bias=True)
    x = mx.random.normal((2, 3, 64))
    smc.uninstall()
    want = layer(x)
    smc.install(force=True)
    got = layer(x)
    assert routed == [(6, 64)]
    assert got.shape == (2, 3, 48)
    assert mx.allclose(got, want).item()
    layer(mx.random.normal((1, 1, 64)))  # one row: MLX's own
    assert len(routed) == 1


def test_a_tied_output_layer_is_routed_too(routed):
    embed = nn.Embedding(100, 64)
    x = mx.random.normal((1, 4, 64))
    assert embed.as_linear(x).shape == (1, 4, 100)
    assert routed == [(4, 64)]


def test_a_model_steps_as_it_does_without_the_kernel(routed):
    model = tiny_llama(vocab_size=96, tie_word_embeddings=True)
    tokens = mx.array([[1, 2, 3, 4, 5]])
    got = model(tokens)
    smc.uninstall()
    want = model(tokens)
    assert len(routed) == 2 * 7 + 1  # seven projections a layer, and the tied output layer
    assert mx.array_equal(got, want).item()


def test_install_and_uninstall_put_mlxs_methods_back():
    linear, as_linear = nn.Linear.__call__, nn.Embedding.as_linear
    smc.install(force=True)
    assert smc.is_installed()
    smc.install(force=True)  # twice: wrapped once
    assert nn.Linear.__call__.__wrapped__ is linear
    smc.uninstall()
    assert nn.Linear.__call__ is linear and nn.Embedding.as_linear is as_linear


@ONLY_CPU
def test_install_does_nothing_on_the_cpu():
    assert smc.install() is False
    assert not smc.is_installed()


def test_it_is_off_unless_turned_on_and_the_off_switch_wins(monkeypatch):
    """Unchecked on a CUDA GPU so far: off by default there too (see the module's docstring)."""
    monkeypatch.setattr(smc, "may_install", lambda env, force=False: True)
    monkeypatch.setattr(smc, "self_check", lambda: None)
    monkeypatch.delenv(smc.ENABLE_ENV, raising=False)
    assert smc.install() is False
    monkeypatch.setenv(smc.ENABLE_ENV, "0")
    assert smc.install() is False
    monkeypatch.setenv(smc.ENABLE_ENV, "1")
    try:
        assert smc.install() is True
    finally:
        smc.uninstall()
    monkeypatch.undo()
    monkeypatch.setenv(smc.ENABLE_ENV, "1")
    monkeypatch.setenv(smc.DISABLE_ENV, "1")
    assert smc.install(force=True) is False  # even forced
    assert not smc.is_installed()


def test_baselines_run_on_mlxs_own_functions_and_the_kernels_come_back():
    smc.install(force=True)
    sdpa = mx.fast.scaled_dot_product_attention
    try:
        with as_shipped.mlx_as_shipped():
            assert not smc.is_installed()
        assert smc.is_installed()
        with as_shipped.mlx_as_shipped(enabled=False):
            assert smc.is_installed()
        with pytest.raises(RuntimeError), as_shipped.mlx_as_shipped():
            raise RuntimeError("a baseline failed")
        assert smc.is_installed()  # back even so
        assert mx.fast.scaled_dot_product_attention is sdpa
        assert not vac.is_installed()  # not installed before: not installed by it
    finally:
        smc.uninstall()


def test_the_kernel_source_names_what_mlx_passes_it():
    source = smc.kernel_source()
    for name in ("x_shape", "w_shape", "out[", "ROWS", "COLS", "WARPS", "T"):
        assert name in source
    assert smc._rows_bucket(2) == 2 and smc._rows_bucket(5) == 8 and smc._rows_bucket(16) == 16


@ONLY_CPU
def test_the_checker_says_there_is_nothing_to_check_without_cuda(capsys):
    from engine.bench import matmul_check

    assert matmul_check.main(["--quick"]) == 0
    assert "CUDA only" in capsys.readouterr().out


def test_a_kernel_that_differs_from_mlx_is_not_installed(monkeypatch, caplog):
    """On a GPU, driver or MLX where the kernel computes otherwise, MLX's matmuls stay."""
    monkeypatch.setattr(smc, "may_install", lambda env, force=False: True)
    monkeypatch.setenv(smc.ENABLE_ENV, "1")
    monkeypatch.setattr(smc, "skinny_matmul", lambda x, w, **kw: (x @ w.T)[:, ::-1])
    assert smc.self_check() is not None
    assert smc.install() is False and not smc.is_installed()
    assert "differs from MLX" in caplog.text

    def raises(x, w, **kw):
        raise RuntimeError("NVRTC failed")

    monkeypatch.setattr(smc, "skinny_matmul", raises)
    assert "NVRTC failed" in smc.self_check()
    monkeypatch.setattr(smc, "skinny_matmul", lambda x, w, **kw: x @ w.T)
    assert smc.self_check() is None
    try:
        assert smc.install() is True
    finally:
        smc.uninstall()

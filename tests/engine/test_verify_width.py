"""Verify forwards widened to a floor of tokens (engine/core/verify_width.py): a forward of too few
tokens gets padding positions no row keeps, given back with the rejected drafts; every row still
equals mlx_lm.generate alone, in series and ahead, alone and beside others, and rows with
recurrent layers are never widened."""

from __future__ import annotations

import random

import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.config import EngineConfig
from engine.core.verify_width import DEFAULT_CUDA_MIN_TOKENS, forward_width
from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.engine_harness import Driver, make_core, make_prompt, make_tiny, synthetic

LOOKUP = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4)


def test_forward_width():
    assert [forward_width(1, w, min_tokens=6) for w in (1, 2, 5, 6, 9)] == [1, 6, 6, 6, 9]
    assert [forward_width(r, 2, min_tokens=6) for r in (1, 2, 3, 5)] == [6, 3, 2, 2]
    assert forward_width(4, 5, min_tokens=1) == 5
    assert forward_width(0, 5, min_tokens=6) == 5


def test_the_floor_is_cuda_only_unless_set():
    assert EngineConfig(verify_min_tokens=8).verify_tokens_floor() == 8
    assert EngineConfig(verify_min_tokens=0).verify_tokens_floor() == 1
    assert EngineConfig().verify_tokens_floor() == 1  # these tests run on the CPU
    assert DEFAULT_CUDA_MIN_TOKENS > 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("width"))


@pytest.fixture(autouse=True)
def same_drafts(monkeypatch):
    from tests.engine.engine_harness import SYNTH

    monkeypatch.setattr(SYNTH, "_rng", random.Random(0))


def widths_fed(core) -> list[tuple[int, int]]:
    """(rows, tokens per row) of every forward the decode batch runs from now on."""
    seen = []
    batch = core.executor.batch
    forward = batch._forward

    def spy(tokens, *args, **kwargs):
        seen.append(tuple(tokens.shape))
        return forward(tokens, *args, **kwargs)

    batch._forward = spy
    return seen


def repetitive(seed: int, length: int) -> list[int]:
    part = make_prompt(seed, length // 3)
    return (part * 4)[:length]


@pytest.mark.parametrize("ahead", [False, True], ids=["serial", "rounds-ahead"])
@pytest.mark.parametrize("floor", [6, 16])
def test_widened_rounds_equal_generate_alone(tiny, ahead, floor):
    """One row alone (k=4: five tokens, widened), then rows joining at other acceptances and
    methods, some ending inside their drafts: each row's tokens are mlx_lm.generate's."""
    core = make_core(tiny, verify_ahead=ahead, verify_min_tokens=floor)
    seen = widths_fed(core)
    driver = Driver(core)
    n = 30
    first = make_prompt(70, 14)
    rows = {
        driver.add(first, n, speculative=synthetic(first, tiny.greedy(first, n), 0.9, 4)): first
    }
    driver.until(lambda: len(driver.tokens[next(iter(rows))]) >= 8)
    for i, p in enumerate((0.5, 0.0)):
        prompt = make_prompt(71 + i, 11 + 4 * i)
        spec = synthetic(prompt, tiny.greedy(prompt, n - 7 * i), p, 2 + i)
        rows[driver.add(prompt, n - 7 * i, speculative=spec)] = prompt
    copy = repetitive(74, 27)
    rows[driver.add(copy, n, speculative=LOOKUP)] = copy
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, len(driver.tokens[rid])), prompt[:3]
        assert len(driver.tokens[rid]) in (n, n - 7)
    widened = [(r, w) for r, w in seen if w > 1 and r * w >= floor]
    assert (1, max(6, floor)) in seen, seen  # the row alone, widened
    assert len(widened) == len([1 for r, w in seen if w > 1]), "a verify forward below the floor"


@pytest.mark.parametrize("arch", ["qwen3", "deepseek_v3", "gpt_oss", "qwen3_next"])
def test_architectures_widened_equal_generate_alone(arch, tmp_path):
    """MLA with experts, sliding windows (gpt-oss) and a hybrid with recurrent layers (never
    widened: `forward_width` leaves them as they are)."""
    from mlx_lm import load as mlx_load

    from tests.architectures.build import save_folder
    from tests.architectures.cases import prompt as catalog_prompt
    from tests.architectures.catalog import BY_NAME
    from tests.engine.engine_harness import TinyModel

    folder = tmp_path / arch
    save_folder(BY_NAME[arch], folder)
    tiny = TinyModel(folder, *mlx_load(str(folder)))
    core = make_core(tiny, verify_min_tokens=8)
    seen = widths_fed(core)
    driver = Driver(core)
    n = 20
    rows = {}
    for i, p in enumerate([0.9, 0.4]):
        prompt = list(catalog_prompt(9, i, 9 + 7 * i))
        spec = synthetic(prompt, tiny.greedy(prompt, n), p, 4)
        rows[driver.add(prompt, n, speculative=spec)] = prompt
        if i == 0:
            driver.until(lambda: len(driver.tokens[next(iter(rows))]) >= 6)
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n)
    verify = [(r, w) for r, w in seen if w > 1]
    if core.executor.batch.recurrent or arch == "qwen3_next":
        assert all(w <= 5 for _, w in verify), verify
    else:
        assert (1, 8) in verify and (2, 4) in verify, verify

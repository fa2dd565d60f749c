"""The prefill pacer sizes a step's prompt chunk from measured costs (engine/core/prefill_pacer.py)."""

from __future__ import annotations

from engine.core.prefill_pacer import PrefillPacer


def settle(pacer: PrefillPacer, *, decode: float, fixed: float, per_token: float) -> int:
    """Steps on a machine where a step with n prompt tokens takes decode + fixed + n*per_token."""
    for _ in range(40):
        pacer.observe(decode, prefill_tokens=0, decoding=True)
        n = pacer.budget(decoding=True)
        pacer.observe(decode + fixed + n * per_token, prefill_tokens=n, decoding=True)
    return pacer.budget(decoding=True)


def test_whole_chunks_while_nobody_decodes_or_when_pacing_is_off():
    pacer = PrefillPacer(max_chunk=512)
    settle(pacer, decode=0.1, fixed=0.0, per_token=0.01)
    assert pacer.budget(decoding=False) == 512
    off = PrefillPacer(max_chunk=512, gap_factor=None)
    assert settle(off, decode=0.1, fixed=0.0, per_token=0.01) == 512


def test_a_step_with_prefill_settles_at_about_gap_factor_decode_steps():
    pacer = PrefillPacer(max_chunk=512, gap_factor=3.0)
    n = settle(pacer, decode=0.1, fixed=0.02, per_token=0.01)
    assert abs(n - 18) <= 1  # 0.1 + 0.02 + 18 * 0.01 = 0.3 s: three decode steps


def test_cheap_prompts_keep_whole_chunks_and_dear_ones_keep_moving():
    cheap = PrefillPacer(max_chunk=512)
    assert settle(cheap, decode=0.01, fixed=0.0, per_token=1e-6) == 512
    dear = PrefillPacer(max_chunk=512, min_chunk=16)
    assert settle(dear, decode=0.01, fixed=0.0, per_token=1.0) == 16


def test_one_slow_step_moves_the_chunk_by_at_most_half():
    pacer = PrefillPacer(max_chunk=512)
    n = settle(pacer, decode=0.1, fixed=0.0, per_token=0.001)
    pacer.observe(100.0, prefill_tokens=n, decoding=True)
    assert pacer.budget(decoding=True) >= n // 2

"""The prefill pacer sizes a step's prompt chunk from measured costs (engine/core/prefill_pacer.py)."""

from __future__ import annotations

from engine.core.prefill_pacer import PrefillPacer


def test_full_chunks_until_measured_and_while_nobody_decodes():
    pacer = PrefillPacer(max_chunk=512)
    assert pacer.budget(decoding=True) == 512
    pacer.observe(0.1, prefill_tokens=0, decoding=True)
    pacer.observe(0.1 + 512 * 0.01, prefill_tokens=512, decoding=True)
    assert pacer.budget(decoding=False) == 512


def test_a_step_with_prefill_costs_about_gap_factor_decode_steps():
    pacer = PrefillPacer(max_chunk=512, gap_factor=3.0)
    pacer.observe(0.1, prefill_tokens=0, decoding=True)
    pacer.observe(0.1 + 512 * 0.01, prefill_tokens=512, decoding=True)
    n = pacer.budget(decoding=True)
    assert n == 20  # 0.1 s of decode + 20 tokens at 10 ms = 0.3 s: three decode steps
    for _ in range(30):  # the costs settle where they are measured
        pacer.observe(0.1 + n * 0.01, prefill_tokens=n, decoding=True)
        pacer.observe(0.1, prefill_tokens=0, decoding=True)
        n = pacer.budget(decoding=True)
    assert n == 20


def test_cheap_prompts_keep_full_chunks_and_dear_ones_keep_moving():
    cheap = PrefillPacer(max_chunk=512)
    cheap.observe(0.01, prefill_tokens=0, decoding=True)
    cheap.observe(0.01 + 512 * 1e-6, prefill_tokens=512, decoding=True)
    assert cheap.budget(decoding=True) == 512
    dear = PrefillPacer(max_chunk=512, min_chunk=16)
    dear.observe(0.01, prefill_tokens=0, decoding=True)
    dear.observe(0.01 + 512 * 1.0, prefill_tokens=512, decoding=True)
    assert dear.budget(decoding=True) == 16

"""The prefill pacer sizes a step's prompt chunk from measured costs (engine/core/prefill_pacer.py)."""

from __future__ import annotations

from engine.core.prefill_pacer import PrefillPacer


def settle(pacer: PrefillPacer, *, decode: float, fixed: float, per_token: float) -> int:
    """Steps on a machine where a step with n prompt tokens takes decode + fixed + n*per_token."""
    for _ in range(40):
        pacer.observe(decode, prefill_tokens=0, decoding=True)
        n = pacer.budget(paced=True)
        pacer.observe(decode + fixed + n * per_token, prefill_tokens=n, decoding=True)
    return pacer.budget(paced=True)


def test_whole_chunks_while_nobody_decodes_or_when_pacing_is_off():
    pacer = PrefillPacer(max_chunk=512)
    settle(pacer, decode=0.1, fixed=0.0, per_token=0.01)
    assert pacer.budget(paced=False) == 512
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
    assert pacer.budget(paced=True) >= n // 2


def test_a_fixed_cost_that_alone_breaks_the_gap_gives_few_large_chunks_not_many_small_ones():
    """As on the H200 (random 1B): a decode step of 7 ms, and 45 ms more for any step with
    prefill (new shapes, rows joining). No chunk keeps three decode steps, so the pacer takes
    chunks whose tokens cost about what the fixed part does (0.045 / 3e-5 = 1500 tokens) instead
    of admitting a burst of chats 16 tokens per step."""
    pacer = PrefillPacer(max_chunk=2048)
    pacer.observe(0.007, prefill_tokens=0, decoding=True)
    seen = []
    for _ in range(8):
        n = pacer.budget(paced=True)
        seen.append(n)
        pacer.observe(0.007 + 0.045 + n * 3e-5, prefill_tokens=n, decoding=True)
    assert min(seen) >= 16 and seen[-1] >= 1400
    line = pacer.cost_line()
    assert line is not None and abs(line.fixed_s - 0.045) < 0.005
    assert abs(settle(pacer, decode=0.007, fixed=0.045, per_token=3e-5) - 1500) < 50


def test_the_cost_line_needs_two_chunk_sizes():
    pacer = PrefillPacer(max_chunk=512)
    pacer.observe(0.1, prefill_tokens=0, decoding=True)
    pacer.observe(0.2, prefill_tokens=64, decoding=True)
    assert pacer.cost_line() is None
    pacer.observe(0.3, prefill_tokens=128, decoding=True)
    line = pacer.cost_line()
    assert line is not None and abs(line.per_token_s - 0.1 / 64) < 1e-9
    assert abs(line.fixed_s) < 1e-9


def test_prompts_processed_alone_size_the_first_chunk_beside_decoding_rows():
    """Steps with no decoding row (the chats' own prompts, at the start) fit the cost line, so
    the first long prompt beside running chats starts at the right size, not at 64 tokens."""
    cpu = PrefillPacer(max_chunk=512)
    for tokens in (40, 120, 300):
        cpu.observe(0.02 + 0.001 * tokens, prefill_tokens=tokens, decoding=False)
    cpu.observe(0.09, prefill_tokens=0, decoding=True)
    assert abs(cpu.budget(paced=True) - 160) <= 1  # 0.02 + 160 * 0.001 = 2 decode steps
    gpu = PrefillPacer(max_chunk=2048)
    for tokens in (120, 2047):
        gpu.observe(0.045 + 3e-5 * tokens, prefill_tokens=tokens, decoding=False)
    gpu.observe(0.007, prefill_tokens=0, decoding=True)
    assert abs(gpu.budget(paced=True) - 1500) <= 1
    assert PrefillPacer(max_chunk=512).budget(paced=True) == 64  # nothing measured yet


def test_on_cuda_chunks_beside_decoding_rows_are_powers_of_two():
    """Each new forward length costs a graph build there: a few sizes, reused."""
    pacer = PrefillPacer(max_chunk=2048, pow2=True)
    sizes = [pacer.fit(n, paced=True) for n in (1, 2, 3, 100, 300, 2047, 2048)]
    assert sizes == [(1, 0), (2, 0), (2, 0), (64, 0), (256, 0), (1024, 0), (2048, 0)]
    assert pacer.fit(300, paced=False) == (300, 0)  # nobody waits: the whole chunk
    assert PrefillPacer(max_chunk=2048).fit(300, paced=True) == (300, 0)  # Metal, the CPU
    off = PrefillPacer(max_chunk=2048, gap_factor=None, pow2=True)
    assert off.fit(300, paced=True, ends_prompt=True) == (300, 0)


def _cuda_steps(pacer: PrefillPacer, spent, *, steps: int, decode: float = 0.010) -> list[int]:
    """Steps of a long prompt beside decoding rows on CUDA, each power `n` adding `spent(n)`."""
    taken = []
    for _ in range(steps):
        pacer.observe(decode, prefill_tokens=0, decoding=True)
        n, _ = pacer.fit(pacer.budget(paced=True), paced=True)
        taken.append(n)
        pacer.observe(decode + spent(n), prefill_tokens=n, decoding=True)
    return taken


def test_on_cuda_a_fixed_cost_within_the_gap_does_not_trap_the_chunk_at_a_small_power():
    """As on an H100 (random 8B): a decode step of 15 ms, and any step with prompt tokens 20 ms
    more, whatever their number up to a few hundred. The steps take the power of two below the
    budget; resized from that, a budget that grows less than 2x per step fell back to the same
    power every time, and a long prompt went 16 tokens a step for 89 steps."""
    pacer = PrefillPacer(max_chunk=2048, pow2=True)
    taken = _cuda_steps(pacer, lambda n: 0.020 + n * 2e-5, steps=30, decode=0.015)
    assert taken[0] == 64 and max(taken[-10:]) >= 256, taken
    assert all(0.035 + n * 2e-5 <= 0.046 for n in taken)  # each step about three decode steps


def test_one_dear_step_does_not_price_its_chunk_size():
    """A size's cost is the median of its latest steps: one graph build among them is ignored."""
    pacer = PrefillPacer(max_chunk=512)
    pacer.observe(0.01, prefill_tokens=0, decoding=True)
    for spent in (0.01, 0.5, 0.01, 0.01):
        pacer.observe(0.01 + spent, prefill_tokens=64, decoding=True)
        pacer.observe(0.01 + 2 * spent, prefill_tokens=128, decoding=True)
    line = pacer.cost_line()
    assert line is not None and abs(line.per_token_s - 0.01 / 64) < 1e-9 and line.fixed_s < 1e-9


def _tail(pacer: PrefillPacer, todo: int, budget: int) -> list[tuple[int, int]]:
    steps = []
    while todo:
        n, pad = pacer.fit(min(todo, budget), paced=True, ends_prompt=todo <= budget)
        steps.append((n, pad))
        todo -= n
    return steps


def test_a_prompts_tail_goes_as_powers_of_two_and_is_all_processed():
    pacer = PrefillPacer(max_chunk=2048, pow2=True)
    assert _tail(pacer, 300, 256) == [(256, 0), (32, 0), (8, 0), (4, 0)]


def test_a_tail_that_can_take_filler_goes_in_one_padded_step():
    """2,047 tokens went 1024 + 512 + ... + 1 (eleven steps); padded to a power of two they go
    in two, and no step is more than half filler (or the least chunk's worth)."""
    pacer = PrefillPacer(max_chunk=2048, pow2=True, pad_tail=True)
    assert _tail(pacer, 2047, 1024) == [(1024, 0), (1023, 1)]
    assert _tail(pacer, 300, 256) == [(256, 0), (44, 20)]
    assert _tail(pacer, 5, 256) == [(5, 3)]
    assert _tail(pacer, 600, 1024) == [(512, 0), (88, 40)]  # not 600 as 1024
    for todo in range(1, 3000, 7):
        steps = _tail(pacer, todo, 512)
        assert sum(n for n, _ in steps) == todo
        for n, pad in steps:
            assert (n + pad) & (n + pad - 1) == 0 and pad <= max(n // 2, pacer.min_chunk)
    assert PrefillPacer(max_chunk=2048, pad_tail=True).fit(300, paced=True, ends_prompt=True) == (
        300,
        0,
    )  # Metal, the CPU: any size already


def test_another_models_decoding_rows_pace_a_prompt_processed_alone():
    """This model only processes a prompt, but another model's chats wait through its steps:
    each step is sized to about (gap_factor - 1) of their decode step."""
    pacer = PrefillPacer(max_chunk=512, gap_factor=3.0)
    pacer.others_decoding, pacer.others_decode_s = True, 0.1
    n = pacer.budget(paced=True)  # the scheduler asks as if rows decode
    assert n < 512
    for _ in range(40):
        pacer.observe(0.02 + n * 0.01, prefill_tokens=n, decoding=False)
        n = pacer.budget(paced=True)
    assert abs(n - 18) <= 1  # 0.02 + 18 * 0.01 = 0.2 s: two of their decode steps
    pacer.others_decoding, pacer.others_decode_s = False, None
    assert pacer.budget(paced=False) == 512  # nobody waits


def test_a_bursts_whole_chunk_prices_tokens_but_does_not_resize_the_paced_chunk():
    pacer = PrefillPacer(max_chunk=512, gap_factor=3.0)
    n = settle(pacer, decode=0.1, fixed=0.02, per_token=0.01)
    costs = pacer.costs.count()
    pacer.observe(0.1 + 0.02 + 512 * 0.01, prefill_tokens=512, decoding=True, paced=False)
    assert pacer.budget(paced=True) == n
    assert pacer.costs.count() == costs + 1


def test_on_cuda_a_power_that_broke_the_gap_is_not_tried_again():
    """As on an H100 (random 8B, session 22): 256 tokens added 16 ms to a 10-ms decode step,
    within the 20 ms the gap allows, so the budget grew past 256 and took 512 (64 ms) every
    few steps."""
    pacer = PrefillPacer(max_chunk=2048, pow2=True)
    taken = _cuda_steps(pacer, lambda n: 0.003 + n * 5.5e-5, steps=40)
    assert taken.count(512) <= 1 and taken.count(256) >= 30, taken
    assert max(taken) <= 512, taken


def test_one_stall_among_a_sizes_steps_does_not_halve_the_chunk():
    """One step of a size seen many times that takes four times its usual (a graph built again,
    another process) leaves the budget where it was: halved, the next steps took sizes never
    built, each itself a stall (an H100 went 256, 128, 64, 32 tokens at 54-61 ms a step)."""
    pacer = PrefillPacer(max_chunk=2048, pow2=True)
    usual = lambda n: 0.003 + n * 5.5e-5  # noqa: E731
    assert _cuda_steps(pacer, usual, steps=20)[-1] == 256
    pacer.observe(0.010, prefill_tokens=0, decoding=True)
    pacer.observe(0.010 + 4 * usual(256), prefill_tokens=256, decoding=True)
    assert pacer.fit(pacer.budget(paced=True), paced=True)[0] == 256
    # a size whose cost really rose moves the budget once it is most of its latest steps
    dearer = _cuda_steps(pacer, lambda n: 4 * usual(n), steps=6)
    assert min(dearer) < 256, dearer


def test_one_stall_beside_another_models_rows_does_not_halve_the_chunk():
    """The same as above where only another model's chats wait (its prompt processed alone):
    that path resized from the raw seconds, so each stall there halved the budget (two of them
    three steps apart took the prompt down to 128-token steps)."""
    pacer = PrefillPacer(max_chunk=2048, pow2=True)
    pacer.others_decoding, pacer.others_decode_s = True, 0.010
    usual = lambda n: 0.003 + n * 5.5e-5  # noqa: E731
    taken, budgets = [], []
    for stall in [1] * 20 + [4, 1, 4] + [1] * 3:
        n, _ = pacer.fit(pacer.budget(paced=True), paced=True)
        taken.append(n)
        pacer.observe(stall * usual(n), prefill_tokens=n, decoding=False)
        budgets.append(pacer.chunk)
    assert taken[19:] == [256] * 7, taken
    assert len(set(budgets[19:])) == 1, budgets  # not halved, not regrowing
    dearer = []  # a size whose cost really rose still moves the budget
    for _ in range(6):
        n, _ = pacer.fit(pacer.budget(paced=True), paced=True)
        dearer.append(n)
        pacer.observe(4 * usual(n), prefill_tokens=n, decoding=False)
    assert min(dearer) < 256, dearer

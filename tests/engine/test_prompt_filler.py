"""On CUDA a prompt's last chunk beside decoding rows is padded with filler tokens up to a power
of two (one forward shape, not one step per bit of the rest: engine/core/prefill_pacer.py); the
filler is trimmed off the cache after the forward. Forced on here (`prefill_pow2`), every reply
stays exactly mlx_lm.generate's: alone, riding on the decode step, beside verify rounds, batched
with another prompt, and for a drafter that reads the prompt's hidden states."""

from __future__ import annotations

import random

import pytest
from mlx_lm import load as mlx_load

from engine.core import executor as executor_module
from engine.core import prefill as prefill_module
from engine.core.prefill import takes_filler
from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.engine_harness import P_A, P_B, Driver, TinyModel, make_core, make_prompt
from tests.mtp_models import make_mtp_folder
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_qwen3_next_dir

pytestmark = pytest.mark.timeout(300)

LONG = make_prompt(7, 90)  # 89 tokens to prefill: 16-token chunks, then 9 padded to 16
SHORT = (make_prompt(8, 21), make_prompt(9, 25))  # both padded to 32 in one step of 64


def _recording(drive: Driver) -> list[tuple[int, int]]:
    """(tokens, filler) of every prompt chunk paced beside decoding rows (not those of the
    decoding rows' own burst, which go whole: engine/core/bursts.py)."""
    chunks: list[tuple[int, int]] = []
    schedule = drive.core.scheduler.schedule

    def recording():
        plan = schedule()
        if plan.decode and plan.paced:
            chunks.extend((c.tokens, c.pad) for c in plan.prefill)
        return plan

    drive.core.scheduler.schedule = recording
    return chunks


def _beside_two_chats(model: TinyModel, prompts, specs=(None, None, None), **config) -> Driver:
    drive = Driver(make_core(model, prefill_pow2=True, **config))
    chunks = _recording(drive)
    kw = [{"speculative": spec} if spec is not None else {} for spec in specs]
    a, b, *late = prompts
    ra = drive.add(a, max_tokens=48, **kw[0])
    rb = drive.add(b, max_tokens=48, **kw[1])
    drive.until(lambda: len(drive.tokens[ra]) >= 2 and len(drive.tokens[rb]) >= 2)
    rl = [drive.add(p, max_tokens=8, **kw[2]) for p in late]
    drive.finish()
    assert drive.tokens[ra] == model.greedy(a, 48)
    assert drive.tokens[rb] == model.greedy(b, 48)
    for rid, prompt in zip(rl, late):
        assert drive.tokens[rid] == model.greedy(prompt, 8)
    assert any(pad for _, pad in chunks), chunks  # a chunk did carry filler
    for tokens, pad in chunks:
        assert (tokens + pad) & (tokens + pad - 1) == 0, chunks
    return drive


def test_only_plain_kv_caches_take_filler(tiny, tmp_path):
    assert takes_filler(tiny.model)
    gemma3 = mlx_load(str(make_tiny_gemma3_dir(tmp_path / "g", sliding_window=8)))[0]
    hybrid = mlx_load(str(make_tiny_qwen3_next_dir(tmp_path / "q")))[0]
    assert not takes_filler(gemma3)  # a sliding window cannot give positions back once wrapped
    assert not takes_filler(hybrid)  # a recurrent state cannot give them back at all


@pytest.mark.parametrize("shared", [True, False])
def test_a_padded_tail_riding_or_alone_leaves_every_reply_generates(tiny, shared):
    drive = _beside_two_chats(tiny, (P_A, P_B, LONG), packed_prefill=shared)
    assert (drive.core.scheduler.timing.shared_steps > 0) == shared


def test_a_padded_tail_beside_verify_rounds(tiny):
    lookup = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3)
    drive = _beside_two_chats(tiny, (P_A, P_B, LONG), (lookup, lookup, None))
    assert drive.core.scheduler.timing.verify_rounds > 0


def test_two_padded_prompts_in_one_batched_forward(tiny, monkeypatch):
    batched = []
    monkeypatch.setattr(
        prefill_module, "_prefill_padded", _spy(prefill_module._prefill_padded, batched)
    )
    _beside_two_chats(tiny, (P_A, P_B, *SHORT), prefill_chunk=64)
    groups = [[(len(w.tokens), w.pad) for w in group] for group in batched]
    assert groups[-1] == [(20, 12), (24, 8)], groups  # the first was the two chats', unpadded


def _spy(function, calls: list):
    def spying(group, *args):
        calls.append(list(group))
        return function(group, *args)

    return spying


def test_a_drafter_reading_the_prompts_hidden_states_gets_none_of_the_filler(tmp_path, monkeypatch):
    """Its hidden states are one per prompt token (the drafter's positions would slip past the
    filler's otherwise, and only its drafts, not the replies, would show it)."""
    handed: list[tuple[int, int, int]] = []  # (tokens, filler, hidden rows)
    for name in ("prefill_alone", "finish_rider"):
        function = getattr(executor_module, name)

        def checking(work, *args, _function=function):
            _function(work, *args)
            if work.wants_hidden:
                handed.append((len(work.tokens), work.pad, work.hidden.shape[0]))

        monkeypatch.setattr(executor_module, name, checking)
    path = make_mtp_folder("mimo", tmp_path / "model")
    mimo = TinyModel(path, *mlx_load(str(path)))
    rng = random.Random(5)
    prompts = [[rng.randrange(20, 1000) for _ in range(n)] for n in (9, 14, 70)]
    mtp = SpeculativeParams(method=SpecMethod.MTP, draft_tokens=2)
    drive = _beside_two_chats(mimo, prompts, (mtp, mtp, mtp))
    assert drive.core.scheduler.timing.verify_rounds > 0
    assert any(pad for _, pad, _ in handed), handed
    assert all(rows == tokens for tokens, _, rows in handed), handed

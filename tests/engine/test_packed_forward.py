"""A prompt's chunk shares the decoding rows' forward (engine/core/packed_forward.py): one
forward runs the MLPs, norms and head over both, only the sequence mixers run per part. Checked
per model at load against separate forwards; every reply stays exactly mlx_lm.generate's,
for attention-only models, sliding windows past their size and hybrid recurrent layers; a
failing shared forward loses nothing."""

from __future__ import annotations

import random
import time

import mlx.core as mx
import pytest
from mlx_lm import load as mlx_load

from engine.cache.batch_rows import merge_row_caches
from engine.core import batch as batch_module
from engine.core import packed_forward as packed_forward_module
from engine.core.packed_forward import Part, enable, packed_forward, supported
from engine.core.prefill import PrefillWork
from engine.core.prefill_pacer import PacedStep
from engine.core.step_plan import StepOutput
from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.engine_harness import (
    P_A,
    P_B,
    Driver,
    TinyModel,
    make_core,
    make_prompt,
    synthetic,
)
from tests.mtp_models import make_mtp_folder
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_qwen3_next_dir, prefill

pytestmark = pytest.mark.timeout(300)

LONG = make_prompt(7, 90)  # several chunks of 16 while two rows decode


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory) -> TinyModel:
    path = make_tiny_gemma3_dir(tmp_path_factory.mktemp("gemma3"), sliding_window=8)
    return TinyModel(path, *mlx_load(str(path)))


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory) -> TinyModel:
    path = make_tiny_qwen3_next_dir(tmp_path_factory.mktemp("qwen3_next"))
    return TinyModel(path, *mlx_load(str(path)))


def test_the_check_accepts_models_it_can_split(tiny, gemma3, hybrid):
    for model in (tiny.model, gemma3.model, hybrid.model):
        assert enable(model) is None
        assert supported(model)


def test_a_model_that_reads_positions_outside_its_mixers_is_refused_and_left_as_it_was():
    from tests.architectures.build import build_model
    from tests.architectures.catalog import BY_NAME

    model, _ = build_model(BY_NAME["gpt2"])  # absolute positions from the cache's offset
    problem = enable(model)
    assert problem is not None and "offset" in problem
    assert not supported(model)
    assert not [m for _, m in model.named_modules() if type(m).__name__.startswith("Packed")]
    assert enable(model) == problem  # checked once


def test_shared_forward_matches_separate_forwards_past_a_sliding_window(gemma3):
    model = gemma3.model
    assert enable(model) is None
    rows = [make_prompt(11, 11), make_prompt(12, 19)]  # past the window of 8
    held, chunk = make_prompt(13, 10), make_prompt(14, 6)
    pending = mx.array([[r[-1]] for r in rows], dtype=mx.uint32)
    x = mx.array([chunk], dtype=mx.uint32)
    after = mx.array([[5]], dtype=mx.uint32)

    def caches():
        batch = merge_row_caches([prefill(model, r[:-1], one_by_one=3) for r in rows])
        return batch, prefill(model, held)

    batch, row_cache = caches()
    want_rows = model(pending, cache=batch)
    model(x, cache=row_cache)
    want_next = model(after, cache=row_cache)
    batch, row_cache = caches()
    (_, got_rows), _ = packed_forward(model, [Part(pending, batch), Part(x, row_cache)])
    got_next = model(after, cache=row_cache)
    assert mx.allclose(got_rows, want_rows, atol=1e-4).item()
    assert mx.allclose(got_next, want_next, atol=1e-4).item()


def _long_prompt_beside_two_chats(
    tiny: TinyModel, specs=(None, None, None), prompts=(P_A, P_B, LONG), **config
) -> Driver:
    """Two chats decode (48 tokens each), then a long prompt arrives; every reply must be
    mlx_lm.generate's."""
    drive = Driver(make_core(tiny, **config))
    a, b, long = prompts
    kw = [{"speculative": spec} if spec is not None else {} for spec in specs]
    ra = drive.add(a, max_tokens=48, **kw[0])
    rb = drive.add(b, max_tokens=48, **kw[1])
    drive.until(lambda: len(drive.tokens[ra]) >= 2 and len(drive.tokens[rb]) >= 2)
    rl = drive.add(long, max_tokens=8, **kw[2])
    drive.finish()
    assert drive.tokens[ra] == tiny.greedy(a, 48)
    assert drive.tokens[rb] == tiny.greedy(b, 48)
    assert drive.tokens[rl] == tiny.greedy(long, 8)
    return drive


@pytest.mark.parametrize("name", ["llama", "gemma3", "qwen3_next"])
def test_a_long_prompt_rides_on_the_decode_steps_and_every_reply_is_generates(
    name, tiny, gemma3, hybrid
):
    model = {"llama": tiny, "gemma3": gemma3, "qwen3_next": hybrid}[name]
    timing = _long_prompt_beside_two_chats(model).core.scheduler.timing
    assert timing.shared_steps >= 3
    assert timing.shared_tokens >= len(LONG) // 2


def test_a_long_prompt_rides_on_verify_rounds(tiny):
    specs = (
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3),
        synthetic(P_B, tiny.greedy(P_B, 48), 0.7, 3),
        None,
    )
    timing = _long_prompt_beside_two_chats(tiny, specs).core.scheduler.timing
    assert timing.verify_rounds > 0
    assert timing.shared_steps >= 3


def test_a_prompt_whose_drafter_reads_hidden_states_rides_along(tmp_path):
    """MTP rows verify while a prompt for another MTP row is processed: its hidden states come
    out of the shared forward."""
    path = make_mtp_folder("mimo", tmp_path / "model")
    mimo = TinyModel(path, *mlx_load(str(path)))
    rng = random.Random(5)
    prompts = [[rng.randrange(20, 1000) for _ in range(n)] for n in (9, 14, 70)]
    mtp = SpeculativeParams(method=SpecMethod.MTP, draft_tokens=2)
    drive = _long_prompt_beside_two_chats(mimo, (mtp, mtp, mtp), prompts)
    timing = drive.core.scheduler.timing
    assert timing.shared_steps >= 3
    assert timing.verify_rounds > 0


def test_the_check_waits_for_the_first_chunk_beside_decoding_rows(tiny):
    """A reply alone never pays for the check's forwards; the first chunk that could ride does."""
    drive = Driver(make_core(tiny))
    a = drive.add(P_A, max_tokens=8)
    drive.finish()
    assert drive.core.executor.packing is None
    assert drive.tokens[a] == tiny.greedy(P_A, 8)
    _long_prompt_beside_two_chats(tiny)  # its own core: checks, then shares


def test_the_checks_time_is_not_taken_for_the_prompts_cost(tiny, monkeypatch):
    """The check runs inside the step of the first chunk beside decoding rows (about a second
    on the H200): the prefill pacer, which sizes chunks from step times, must not see it, or it
    fits a line of a second's fixed cost and takes the next prompt whole."""
    enable = packed_forward_module.enable

    def slow_enable(model):
        time.sleep(0.5)
        return enable(model)

    monkeypatch.setattr(packed_forward_module, "enable", slow_enable)
    drive = Driver(make_core(tiny))
    trace: list[PacedStep] = []
    drive.core.scheduler.pacer.trace = trace
    a = drive.add(P_A, max_tokens=48)
    drive.until(lambda: len(drive.tokens[a]) >= 2)
    drive.add(LONG, max_tokens=4)
    drive.finish()
    assert drive.core.executor.packing
    assert any(s.prefill_tokens and s.decoding for s in trace)
    assert max(s.seconds for s in trace) < 0.4, trace


def test_sharing_can_be_turned_off(tiny):
    drive = _long_prompt_beside_two_chats(tiny, packed_prefill=False)
    assert drive.core.executor.packing is False
    assert drive.core.scheduler.timing.shared_steps == 0


def test_a_shared_forward_that_fails_loses_nothing(tiny, monkeypatch):
    """It fails after writing every cache: the rows and the prompt go back to where they were,
    the step runs again without sharing, and every reply is still generate's."""
    calls = []

    def failing(model, parts, **kwargs):
        packed_forward(model, parts, **kwargs)
        mx.eval([c.state for p in parts for c in p.cache])  # every layer written
        calls.append(len(parts))
        raise RuntimeError("boom")

    monkeypatch.setattr(batch_module, "packed_forward", failing)
    drive = _long_prompt_beside_two_chats(tiny)
    assert calls == [2]  # sharing stopped after the first failure
    assert drive.core.executor.packing is False


def test_chunks_of_several_prompts_keep_their_batched_forward(tiny):
    """Several chunks in one step run in one padded forward of their own (their attention
    batched), not each alone beside the decode rows; one chunk rides."""
    drive = Driver(make_core(tiny))
    a = drive.add(P_A, max_tokens=48)
    drive.until(lambda: len(drive.tokens[a]) >= 2)
    executor = drive.core.executor
    work = [PrefillWork(f"r{i}", [], [1, 2, 3]) for i in range(2)]
    assert executor._may_share(work[:1], StepOutput())
    assert not executor._may_share(work, StepOutput())
    executor.batched_prefill = False  # a model whose prompts cannot be padded together
    assert executor._may_share(work, StepOutput())
    drive.finish()


def test_a_long_prompt_rides_on_a_lone_row_on_its_own_cache(tiny):
    """One chat decodes on its plain KVCache (`solo`): the prompt rides on its steps too."""
    drive = Driver(make_core(tiny))
    a = drive.add(P_A, max_tokens=48)
    drive.until(lambda: len(drive.tokens[a]) >= 2)
    assert drive.batch.solo
    long = drive.add(LONG, max_tokens=8)
    drive.until(lambda: drive.core.scheduler.timing.shared_steps >= 2)
    assert drive.batch.solo  # still on its own cache while the prompt rides
    drive.finish()
    assert drive.tokens[a] == tiny.greedy(P_A, 48)
    assert drive.tokens[long] == tiny.greedy(LONG, 8)

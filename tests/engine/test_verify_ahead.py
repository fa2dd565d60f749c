"""Verify rounds queued before the last one is read back (engine/core/lookahead.py): every row
still equals mlx_lm.generate alone at temperature 0, whatever its drafts' acceptance, its
neighbours, where it stops or when rows join and leave; rows and drafters that cannot run ahead
take the serial round."""

from __future__ import annotations

import random

import mlx.core as mx
import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.requests import GenerationRequest, SamplingParams, SpecMethod, SpeculativeParams
from tests.engine.engine_harness import (
    P_A,
    P_B,
    P_C,
    SEEDED,
    Driver,
    collect,
    make_prompt,
    make_tiny,
    synthetic,
    with_engine,
)
from tests.engine.engine_harness import make_core as harness_core

LOOKUP = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("ahead"))


@pytest.fixture(autouse=True)
def same_drafts(monkeypatch):
    """The shared synthetic drafter corrupts the same tokens whichever tests ran before."""
    from tests.engine.engine_harness import SYNTH

    monkeypatch.setattr(SYNTH, "_rng", random.Random(0))


def make_core(tiny, **config):
    """Rounds run ahead (off by default until a GPU measures them)."""
    config.setdefault("verify_ahead", True)
    return harness_core(tiny, **config)


def counting(core) -> dict[str, int]:
    """How many rounds ran ahead and how many in series."""
    counts = {"ahead": 0, "serial": 0}
    executor = core.executor
    ahead_round, serial_round = executor.ahead.round, executor._verify_round

    def ahead(*args, **kwargs):
        counts["ahead"] += 1
        return ahead_round(*args, **kwargs)

    def serial(*args, **kwargs):
        counts["serial"] += 1
        return serial_round(*args, **kwargs)

    executor.ahead.round, executor._verify_round = ahead, serial
    return counts


def synthetic_rows_equal_generate(
    tiny, acceptances: list[float], *, seed: int, length: int, n: int
) -> dict[str, int]:
    """Rows drafting synthetically at these acceptances (k=4, prompts of growing length) each
    equal mlx_lm.generate alone; returns how many rounds ran ahead and in series."""
    core = make_core(tiny)
    counts = counting(core)
    driver = Driver(core)
    rows = {}
    for i, p in enumerate(acceptances):
        prompt = make_prompt(seed + i, length + 5 * i)
        spec = synthetic(prompt, tiny.greedy(prompt, n), p, 4)
        rows[driver.add(prompt, n, speculative=spec)] = prompt
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n)
    return counts


def repetitive(seed: int, length: int) -> list[int]:
    """A prompt that repeats itself, so prompt lookup finds matches."""
    part = make_prompt(seed, length // 3)
    return (part * 4)[:length]


def test_mixed_rows_running_ahead_equal_generate_alone(tiny):
    core = make_core(tiny)
    counts = counting(core)
    driver = Driver(core)
    n = 40
    rows = {
        driver.add(P_A, n, speculative=synthetic(P_A, tiny.greedy(P_A, n), 0.9, 4)): P_A,
        driver.add(P_B, n, speculative=synthetic(P_B, tiny.greedy(P_B, n), 0.3, 3)): P_B,
        driver.add(P_C, n, speculative=synthetic(P_C, tiny.greedy(P_C, n), 0.0, 2)): P_C,
    }
    copy = repetitive(7, 30)
    rows[driver.add(copy, n, speculative=LOOKUP)] = copy
    plain = make_prompt(9, 17)
    rows[driver.add(plain, n)] = plain
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n), prompt[:3]
    # serial only while prompt chunks still ride on the decode step
    assert counts["ahead"] > 10 and counts["serial"] <= 3


@pytest.mark.parametrize("acceptance", [1.0, 0.9, 0.6, 0.0])
def test_one_row_at_any_acceptance(tiny, acceptance):
    core = make_core(tiny)
    counts = counting(core)
    driver = Driver(core)
    n = 33
    rid = driver.add(P_B, n, speculative=synthetic(P_B, tiny.greedy(P_B, n), acceptance, 4))
    driver.finish()
    assert driver.tokens[rid] == tiny.greedy(P_B, n)
    assert counts["ahead"] > 0 and counts["serial"] == 0


def test_rows_stopping_inside_their_drafts_and_rows_joining(tiny):
    """Rows end at different rounds (some inside an accepted draft, one round after theirs
    already queued) while others join: the rest stay exact, and so does each reply's end."""
    core = make_core(tiny)
    driver = Driver(core)
    expected = {}
    for i, n in enumerate([5, 9, 14, 22]):
        prompt = make_prompt(20 + i, 10 + 3 * i)
        spec = synthetic(prompt, tiny.greedy(prompt, 40), 1.0, 4)
        expected[driver.add(prompt, n, speculative=spec)] = tiny.greedy(prompt, n)
    for _ in range(6):
        driver.step()
    late = make_prompt(30, 21)
    expected[driver.add(late, 18, speculative=synthetic(late, tiny.greedy(late, 18), 0.8, 3))] = (
        tiny.greedy(late, 18)
    )
    driver.finish()
    for rid, tokens in expected.items():
        assert driver.tokens[rid] == tokens


def test_the_serial_round_takes_rows_that_cannot_run_ahead(tiny):
    """A sampled row or one with a repetition penalty makes the whole batch verify in series;
    when it leaves, the others run ahead again, exact throughout."""
    core = make_core(tiny)
    counts = counting(core)
    driver = Driver(core)
    n = 40  # at most 5 tokens a round: it outlives the sampled row's 3 by several rounds
    greedy = driver.add(P_A, n, speculative=synthetic(P_A, tiny.greedy(P_A, n), 0.8, 4))
    driver.add(P_C, 3, sampling=SEEDED, speculative=LOOKUP)
    driver.finish()
    assert driver.tokens[greedy] == tiny.greedy(P_A, n)
    assert counts["serial"] > 0 and counts["ahead"] > 0


def test_switched_off_every_round_is_serial(tiny):
    core = make_core(tiny, verify_ahead=False)
    counts = counting(core)
    driver = Driver(core)
    rid = driver.add(P_A, 20, speculative=synthetic(P_A, tiny.greedy(P_A, 20), 0.9, 4))
    driver.finish()
    assert driver.tokens[rid] == tiny.greedy(P_A, 20)
    assert counts == {"ahead": 0, "serial": counts["serial"]} and counts["serial"] > 0


def test_a_penalised_row_never_runs_ahead(tiny):
    core = make_core(tiny)
    counts = counting(core)
    driver = Driver(core)
    penalised = SamplingParams(temperature=0.0, repetition_penalty=1.3)
    driver.add(P_A, 12, sampling=penalised, speculative=LOOKUP)
    driver.finish()
    assert counts["ahead"] == 0


def test_whole_buffer_attention_running_ahead(tiny, monkeypatch):
    """As on a GPU: multi-token forwards attend over the whole buffer, and the mask hides the
    positions given back lazily there too."""
    from engine.cache import ragged

    monkeypatch.setattr(ragged, "default_whole_buffer", lambda: True)
    counts = synthetic_rows_equal_generate(tiny, [0.9, 0.5], seed=40, length=14, n=36)
    assert counts["ahead"] > 5


def test_guessed_rounds_are_counted_apart(tiny):
    """A draft drawn on a guess that proved wrong is verified (its tokens are exact) but left
    out of the drafter's acceptance: the live panel and "auto" see what the drafter does. At
    acceptance 0.5 and k=4 most guesses fail; counted with them, the first position's
    acceptance would read near 0.25."""
    core = make_core(tiny)
    driver = Driver(core)
    n = 160  # about seventy rounds counted: 0.5 within 0.2 is over three standard deviations
    rid = driver.add(P_A, n, speculative=synthetic(P_A, tiny.greedy(P_A, n), 0.5, 4))
    state = core.scheduler.states()[0]
    driver.finish()
    assert driver.tokens[rid] == tiny.greedy(P_A, n)
    spec = state.stats.spec
    assert spec.guessed_rounds > 20 and spec.rounds > 20
    assert 0.3 < spec.acceptance_by_position[0] < 0.7
    # the live panel's "Rounds ahead" and "Guessed wrong": every round but the first ran ahead
    assert spec.rounds + spec.guessed_rounds - 2 <= spec.ahead_rounds
    assert spec.ahead_share > 0.9 and spec.guessed_share == spec.guessed_rounds / spec.ahead_rounds


def test_serial_rounds_are_not_counted_ahead(tiny):
    core = make_core(tiny, verify_ahead=False)
    driver = Driver(core)
    n = 30
    driver.add(P_A, n, speculative=synthetic(P_A, tiny.greedy(P_A, n), 0.9, 4))
    state = core.scheduler.states()[0]
    driver.finish()
    spec = state.stats.spec
    assert spec.rounds > 3 and spec.ahead_rounds == 0 and spec.ahead_share == 0.0


def test_a_row_that_ends_inside_a_round_is_cached_at_its_end(tiny, tmp_path):
    """A row whose reply ends while its next round is already queued holds positions past its
    end: the prompt cache stores it at the reply's end, and the next turn, starting from that
    cache, is still exact."""
    n = 13  # ends inside a round: its drafts run past it
    reply = tiny.greedy(P_C, 40)
    turn2 = P_C + reply[:n] + make_prompt(50, 6)

    async def body(eng):
        spec = synthetic(P_C, reply, 1.0, 4)
        first = await collect(
            eng, GenerationRequest(prompt_tokens=P_C, max_tokens=n, speculative=spec)
        )
        spec = synthetic(turn2, tiny.greedy(turn2, 20), 0.8, 4)
        request = GenerationRequest(prompt_tokens=turn2, max_tokens=20, speculative=spec)
        return first, await collect(eng, request)

    first, second = with_engine(
        tiny.path, body, verify_ahead=True, prompt_cache_dir=str(tmp_path), prefill_chunk=16
    )
    assert first.finished.token_ids == reply[:n]
    assert second.finished.token_ids == tiny.greedy(turn2, 20)
    assert second.finished.stats.cached_tokens >= len(P_C) + n - 1


@pytest.fixture(scope="module")
def tiny_ties(tmp_path_factory):
    """A tiny llama whose tokens 1000 and 1001 often lead with exactly equal logits (equal
    rows of its output layer): mlx-lm takes the lower id."""
    from mlx_lm import load as mlx_load
    from mlx_lm.utils import save_model

    from tests.engine.engine_harness import TinyModel
    from tests.tiny_models import make_tiny_llama_dir

    path = make_tiny_llama_dir(tmp_path_factory.mktemp("ahead_ties"), tie_word_embeddings=False)
    model, _ = mlx_load(str(path))
    weight = model.lm_head.weight
    weight[1000] = weight[1000] * 5
    weight[1001] = weight[1000]
    model.lm_head.weight = weight
    save_model(path, model)
    return TinyModel(path, *mlx_load(str(path)))


def test_near_ties_are_broken_as_generate_breaks_them(tiny_ties, monkeypatch):
    """On a CPU a round ahead picks the raw argmax on the device and the host breaks near
    ties as mlx-lm does when it reads the round back. Here the device breaks exact ties the
    other way (the highest id, as a raw argmax can where log-probabilities round two logits
    together), so rows are corrected (offset, next input, their part of the round already
    queued) again and again, and every row stays exact."""
    from engine.core import lookahead

    def highest(logits):
        last = logits.shape[-1] - 1
        return (last - mx.argmax(logits[..., ::-1], axis=-1)).astype(mx.uint32)

    corrected = []
    break_ties = lookahead._break_ties

    def spy(*args):
        corrected.append(break_ties(*args))
        return corrected[-1]

    monkeypatch.setattr(lookahead, "raw_argmax", highest)
    monkeypatch.setattr(lookahead, "_break_ties", spy)
    acceptances = [1.0, 0.9, 0.6, 0.9, 1.0, 0.3]
    counts = synthetic_rows_equal_generate(tiny_ties, acceptances, seed=60, length=8, n=40)
    assert counts["ahead"] > 10
    assert sum(corrected) > 5, "ties seldom changed a token: the test lost its point"


@pytest.mark.parametrize(
    "arch", ["qwen3", "phi3", "olmo2", "starcoder2", "deepseek_v3", "cohere", "gpt_oss"]
)
def test_architectures_running_ahead_equal_generate_alone(arch, tmp_path):
    """Rounds ahead on other architectures' tiny models (tests/architectures/catalog.py):
    attention with biases, norms on queries and keys, MLA with a mixture of experts, and
    gpt-oss, whose sliding-window layers keep it on the serial round; every row exact."""
    from mlx_lm import load as mlx_load

    from tests.architectures.build import save_folder
    from tests.architectures.cases import prompt as catalog_prompt
    from tests.architectures.catalog import BY_NAME
    from tests.engine.engine_harness import TinyModel

    folder = tmp_path / arch
    save_folder(BY_NAME[arch], folder)
    tiny = TinyModel(folder, *mlx_load(str(folder)))
    core = make_core(tiny)
    counts = counting(core)
    driver = Driver(core)
    n = 24
    rows = {}
    for i, p in enumerate([1.0, 0.7, 0.3]):
        prompt = list(catalog_prompt(9, i, 9 + 7 * i))  # ids within its small vocabulary
        spec = synthetic(prompt, tiny.greedy(prompt, n), p, 4)  # drafts past it are cut
        rows[driver.add(prompt, n, speculative=spec)] = prompt
    copy = list(catalog_prompt(9, 5, 27, repeats=True))
    rows[driver.add(copy, n, speculative=LOOKUP)] = copy
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n)
    assert counts["ahead"] > 0 or arch == "gpt_oss"


@pytest.mark.parametrize("ahead", [False, True], ids=["serial", "rounds-ahead"])
def test_a_draft_token_outside_the_vocabulary_ends_the_draft(tiny, monkeypatch, ahead):
    """A drafter that proposes ids the target has no embedding for (here the synthetic one,
    corrupting into a vocabulary twenty times the model's) never reaches the forward, which
    would read past the embedding table: the draft ends before such a token."""
    from tests.engine.engine_harness import SYNTH

    monkeypatch.setattr(SYNTH, "vocab_size", 20 * SYNTH.vocab_size)
    core = make_core(tiny, verify_ahead=ahead)
    driver = Driver(core)
    n = 30
    rows = {}
    for i, p in enumerate([0.5, 0.2]):
        prompt = make_prompt(100 + i, 11 + 4 * i)
        rows[driver.add(prompt, n, speculative=synthetic(prompt, tiny.greedy(prompt, n), p, 4))] = (
            prompt
        )
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n)

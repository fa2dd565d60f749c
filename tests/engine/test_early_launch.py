"""Decoder layers launched early in the batch's forwards (engine/core/early_launch.py): which
layers, when, the switches, and the engine still exact against mlx_lm.generate with it on."""

from __future__ import annotations

import asyncio

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from engine.core import early_launch
from engine.core.early_launch import DISABLE_ENV, ENABLE_ENV, LaunchesEarly, enable, wanted
from engine.models import load_model
from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.layer_shapes_support import make_layout_folders
from tests.engine.test_exactness import make_prompts, reference_tokens, run_engine


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return make_layout_folders(tmp_path_factory.mktemp("early_launch"))


def test_opt_in_and_turned_off_by_the_off_switch(monkeypatch):
    monkeypatch.delenv(ENABLE_ENV, raising=False)
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    assert not wanted()
    monkeypatch.setenv(ENABLE_ENV, "1")
    assert wanted()
    monkeypatch.setenv(DISABLE_ENV, "1")
    assert not wanted()


def test_every_nth_layer_but_the_last_once(folders):
    model = load_model(str(folders["llama"])).model
    before = dict(tree_flatten(model.parameters()))
    layers = list(model.layers)
    assert enable(model, every=1) == len(layers) - 1
    assert [isinstance(layer, LaunchesEarly) for layer in model.layers] == [True] * (
        len(layers) - 1
    ) + [False]
    assert enable(model, every=1) == len(layers) - 1  # once a model
    after = dict(tree_flatten(model.parameters()))
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


def test_a_layer_queues_its_output_only_inside_a_batch_forward(folders, monkeypatch):
    model = load_model(str(folders["llama"])).model
    enable(model, every=1)
    queued = []
    monkeypatch.setattr(early_launch.mx, "async_eval", lambda arrays: queued.append(len(arrays)))
    x = mx.array([[1, 2, 3]])
    want = model(x)
    assert queued == []  # mlx-lm's own callers (the baselines) run it as it is
    monkeypatch.setitem(early_launch._state, "active", True)
    got = model(x)
    assert queued == [1] * (len(model.layers) - 1)
    assert mx.array_equal(got, want).item()


def test_the_batch_forward_launches_early_where_wanted(monkeypatch):
    from engine.core.batch import DecodeBatch

    class Fake:
        model = None

        @early_launch.launching_early
        def forward(self):
            return early_launch._state["active"]

    fake = Fake()
    fake.model = load_model("random:tiny").model
    monkeypatch.setattr(early_launch, "DEFAULT_LAYERS_PER_LAUNCH", 1)
    monkeypatch.setattr(early_launch, "wanted", lambda: True)
    assert fake.forward() is True and not early_launch._state["active"]
    early_launch.set_early_launch(False)
    try:
        assert fake.forward() is False
    finally:
        early_launch.set_early_launch(True)
    monkeypatch.setattr(early_launch, "wanted", lambda: False)
    assert fake.forward() is False
    assert getattr(DecodeBatch._forward, "__wrapped__", None) is not None  # the batch's forward


def test_engine_exact_with_every_layer_launched_early(folders, monkeypatch):
    monkeypatch.setenv(ENABLE_ENV, "1")
    monkeypatch.setattr(early_launch, "DEFAULT_LAYERS_PER_LAUNCH", 1)
    launches = []
    real = LaunchesEarly.__call__

    def spy(self, *args, **kwargs):
        launches.append(early_launch._state["active"])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LaunchesEarly, "__call__", spy)
    folder = folders["llama"]
    prompts = make_prompts(4, vocab=49152, seed=11, max_len=30)
    want = reference_tokens(folder, prompts, 12)
    specs = [
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2),
        SpeculativeParams(),
    ]
    got = asyncio.run(run_engine(folder, prompts, 12, stagger=True, specs=specs))
    assert got == want
    assert any(launches)  # the layers did launch early

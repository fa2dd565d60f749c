"""Two chats on two models at once in the real app: one chat replies on the built-in model while
the other switches to another model folder (loaded on its first reply); the first reply is
exactly what the same question gets alone, and the Models window shows both models with the
chats that use them."""

from __future__ import annotations

import pytest
from apphelpers import run, spin

from app.settings.chat_settings import ChatSettings
from app.store.records import MessageStatus
from engine.requests import GenerationRequest
from tests.tiny_models import make_tiny_llama_dir

pytestmark = pytest.mark.slow

REPLY_TIMEOUT_S = 180.0
GREEDY = ChatSettings(max_tokens=24, temperature=0.0)
QUESTION = "Name three colours."


def test_a_chat_switches_model_while_another_replies_untouched(qtbot, real_window, tmp_path):
    window = real_window
    other = make_tiny_llama_dir(tmp_path / "tiny-other", tie_word_embeddings=False)
    alone = run(
        window.bridge.engine.generate(
            GenerationRequest(
                messages=[{"role": "user", "content": QUESTION}],
                max_tokens=GREEDY.max_tokens,
                sampling=GREEDY.sampling_params(),
            )
        ),
        timeout=REPLY_TIMEOUT_S,
    )
    first = window.current_tab()
    first.controller.set_settings(GREEDY)
    first.controller.rename("Colours")
    second = window.new_chat()
    second.controller.rename("Elsewhere")
    second.controller.set_settings(GREEDY.replace(model=str(other), max_tokens=8))
    loading: list[str] = []
    second.controller.modelLoading.connect(loading.append)
    assert first.send(QUESTION)
    assert second.send("Hello there")
    assert spin(lambda: not (first.controller.busy or second.controller.busy), REPLY_TIMEOUT_S)
    reply = first.controller.model.message(1)
    assert reply.status is MessageStatus.DONE and reply.content == alone.text
    assert second.controller.model.message(1).status is MessageStatus.DONE
    assert loading and loading[0].startswith("Loading tiny-other") and loading[-1] == ""
    assert "tiny-other" in window.tabs.tabToolTip(window.tabs.indexOf(second))
    dialog = window.show_models()
    window.bridge.poll_stats()
    panel = dialog.loaded_panel
    chats = {
        panel.model.stats(r).name: panel.model.index(r, 3).data()
        for r in range(panel.model.rowCount())
    }
    assert chats["tiny-other"] == "Elsewhere"
    assert "Colours" in chats["SmolLM2-135M-Instruct"]
    run(window.bridge.engine.unload_model(str(other)), timeout=30)  # the shared engine as it was
    dialog.close()

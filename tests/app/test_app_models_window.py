"""The Models window with several models: which are loaded, their memory and the chats that use
each; pin, unload (refused while a chat replies with it), load next to the others and make a
model the default without cancelling anything."""

from __future__ import annotations

from apphelpers import ARTIFACTS, run, spin

from app.theme import theme_manager

SHOTS = ARTIFACTS / "screenshots"


def _rows(panel) -> dict[str, int]:
    return {panel.model.stats(r).name: r for r in range(panel.model.rowCount())}


def _cell(panel, name: str, column: int) -> str:
    return panel.model.index(_rows(panel)[name], column).data()


def test_models_window_shows_loaded_models_memory_and_chats(qtbot, window, fake_engine):
    fake_engine.token_delay_s = 0.05
    first = window.current_tab()
    first.controller.rename("Poem")
    second = window.new_chat()
    second.controller.rename("Summary")
    second.controller.set_settings(second.controller.settings.replace(model="/models/other"))
    run(window.bridge.load_model("/models/other"), 5)
    assert first.send("a long reply while the window is open")
    dialog = window.show_models()
    panel = dialog.loaded_panel
    assert spin(lambda: "(replying)" in (_cell(panel, "fake-model", 3) or ""), 5)
    assert set(_rows(panel)) == {"fake-model", "other"}
    assert _cell(panel, "fake-model", 0) == "fake-model  (default)"
    assert _cell(panel, "fake-model", 3) == "Poem (replying)"
    assert _cell(panel, "other", 3) == "Summary"
    assert _cell(panel, "other", 1) == "4 KB" and _cell(panel, "other", 2).startswith("Idle")
    assert "of the 16.0 GB budget" in panel.summary.text()
    # a model a chat is replying with cannot be unloaded: the button says why
    panel.select("/fake/model")
    assert not panel.unload_button.isEnabled() and "replying" in panel.unload_button.toolTip()
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert "other  ·  4 KB" in window.panel.engine_card.model.text()  # the panel lists both
    assert window.panel.grab().save(str(SHOTS / "panel-two-models-light.png"))
    for theme in ("light", "dark"):
        theme_manager().apply(theme)
        spin(lambda: False, 0.05)
        assert dialog.grab().save(str(SHOTS / f"models-loaded-{theme}.png"))
    theme_manager().apply("light")
    # pin, then unload by hand
    panel.select("/models/other")
    panel.pin_button.click()
    assert spin(lambda: _cell(panel, "other", 2).endswith("pinned"), 5)
    assert panel.pin_button.text() == "Unpin"
    panel.unload_button.click()
    assert spin(lambda: "other" not in _rows(panel), 5)
    assert "Unloaded other: unloaded by hand" in window.statusBar().currentMessage()
    assert spin(lambda: not first.controller.busy, 10)
    assert fake_engine.cancelled == []  # nothing the window did stopped the reply
    dialog.close()


def test_make_default_changes_what_default_chats_use_without_cancelling(qtbot, window, fake_engine):
    fake_engine.token_delay_s = 0.05
    tab = window.current_tab()
    assert tab.send("a reply on the old default")
    window.bridge.request_default("/models/new-default")
    assert spin(lambda: window.bridge.model_spec == "/models/new-default", 5)
    assert spin(lambda: not tab.controller.busy, 10)
    assert fake_engine.cancelled == []
    assert tab.send("the next reply")
    assert spin(lambda: len(fake_engine.requests) == 2 and not tab.controller.busy, 10)
    # the chat names no model: the engine's (new) default serves it
    assert fake_engine.requests[-1].model is None
    assert "new-default" in window.tabs.tabToolTip(0)


def test_models_window_says_which_models_have_mtp_layers(qtbot, window, tmp_path):
    from app.models.models_dialog import COLUMNS, MTP_TEXT
    from tests.mtp_models import make_mtp_folder

    folder = make_mtp_folder("qwen3_5", tmp_path / "tiny-qwen3.5-mtp")
    dialog = window.show_models()
    assert dialog.add_folder(str(folder)) is None
    column = COLUMNS.index("MTP")
    rows = {dialog.table.item(r, 0).text(): r for r in range(dialog.table.rowCount())}
    assert dialog.table.item(rows["tiny-qwen3.5-mtp"], column).text() == MTP_TEXT
    assert all(
        dialog.table.item(r, column).text() == "–" for n, r in rows.items() if "mtp" not in n
    )
    entry = next(e for e in dialog.entries if e.name == "tiny-qwen3.5-mtp")
    assert entry.has_mtp
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SHOTS / "models-mtp-column.png"))
    dialog.close()


def test_models_window_names_the_default_models_draft_head(qtbot, window):
    from app.models.models_dialog import COLUMNS

    dialog = window.show_models()
    column = COLUMNS.index("Draft head")
    default = next(r for r, e in enumerate(dialog.entries) if e.source == "default")
    assert dialog.table.item(default, column).text() == "Trained"
    assert "draft head trained for this model" in dialog.table.item(default, column).toolTip()
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SHOTS / "models-draft-head-column.png"))
    dialog.close()


def test_a_model_can_be_pointed_at_separate_mtp_weights(qtbot, window, tmp_path):
    from app.models.models_dialog import COLUMNS, SEPARATE_MTP_TEXT
    from app.models.mtp_weights import engine_mtp_weights
    from tests.mtp_models import make_mtp_folder

    weights = tmp_path / "qwen3-next-mtp.safetensors"
    folder = make_mtp_folder("qwen3_next", tmp_path / "tiny-qwen3-next", separate=weights)
    dialog = window.show_models()
    assert dialog.add_folder(str(folder)) is None
    rows = {dialog.table.item(r, 0).text(): r for r in range(dialog.table.rowCount())}
    column = COLUMNS.index("MTP")
    assert dialog.table.item(rows["tiny-qwen3-next"], column).text() == "–"  # not in the folder
    dialog.table.selectRow(rows["tiny-qwen3-next"])
    problem = dialog.set_mtp_weights(str(folder / "model.safetensors"))
    assert problem is not None and "holds no MTP weights of a qwen3_next model" in problem
    assert dialog.error.isVisible() and "MTP weights not used" in dialog.error.text()
    assert dialog.set_mtp_weights(str(weights)) is None
    rows = {dialog.table.item(r, 0).text(): r for r in range(dialog.table.rowCount())}
    assert dialog.table.item(rows["tiny-qwen3-next"], column).text() == SEPARATE_MTP_TEXT
    assert engine_mtp_weights(window.store) == ((str(folder), str(weights)),)
    # the chat settings' method picker offers MTP for it now
    entry = next(e for e in dialog.entries if e.name == "tiny-qwen3-next")
    assert entry.has_mtp
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SHOTS / "models-separate-mtp.png"))
    dialog.close()


def test_a_loaded_models_tip_says_what_the_model_cannot_do():
    import dataclasses

    from fake_engine import FAKE_INFO

    from app.models.loaded_models_model import LoadedModelsModel
    from engine.engine_reports import ModelStats

    info = dataclasses.replace(
        FAKE_INFO,
        name="plamo3",
        speculation_note="plamo3 cannot speculate: its output depends on how tokens are chunked",
        prompt_cache_note="plamo3 does not use the prompt cache: its output depends on chunking",
    )
    tip = LoadedModelsModel._tip(ModelStats(key="/models/plamo3", name="plamo3", info=info), 0, [])
    assert "plamo3 cannot speculate" in tip and "plamo3 does not use the prompt cache" in tip

"""Chat tabs: keyboard switching (Ctrl+PgUp/PgDn, Alt+1…9 with Alt+9 the last), titles that
tell tabs apart with the full title as tooltip, and scroll arrows that show when tabs overflow."""

from __future__ import annotations

from apphelpers import ARTIFACTS, spin
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton

from app.theme import theme_manager
from app.window.tab_bar import distinct_titles

SHOTS = ARTIFACTS / "screenshots"
CTRL, ALT = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.AltModifier


def _press(qtbot, window, key, modifier) -> None:
    """A real key press where the user types (the current chat's input box)."""
    qtbot.keyClick(window.current_tab().input, key, modifier)


def test_keyboard_switches_tabs(qtbot, window):
    for _ in range(4):
        window.new_chat()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=2000)
    tabs = window.tabs
    assert tabs.count() == 5 and tabs.currentIndex() == 4
    _press(qtbot, window, Qt.Key.Key_PageDown, CTRL)
    assert tabs.currentIndex() == 0  # wraps around
    _press(qtbot, window, Qt.Key.Key_PageDown, CTRL)
    assert tabs.currentIndex() == 1
    _press(qtbot, window, Qt.Key.Key_PageUp, CTRL)
    _press(qtbot, window, Qt.Key.Key_PageUp, CTRL)
    assert tabs.currentIndex() == 4
    _press(qtbot, window, Qt.Key.Key_3, ALT)
    assert tabs.currentIndex() == 2
    _press(qtbot, window, Qt.Key.Key_1, ALT)
    assert tabs.currentIndex() == 0
    _press(qtbot, window, Qt.Key.Key_9, ALT)
    assert tabs.currentIndex() == 4  # the last tab, as in browsers
    _press(qtbot, window, Qt.Key.Key_2, ALT)
    assert tabs.currentIndex() == 1
    _press(qtbot, window, Qt.Key.Key_8, ALT)
    assert tabs.currentIndex() == 1  # there is no eighth tab
    assert window.windowTitle().startswith(window.current_tab().controller.conversation.title)


def test_tab_titles_are_told_apart_with_full_title_as_tooltip(qtbot, window):
    titles = [
        "Write a short story about a lighthouse keeper",
        "Write a short story about a dragon",
        "Notes",
        "Notes",
    ]
    window.current_tab().controller.rename(titles[0])
    for title in titles[1:]:
        window.new_chat().controller.rename(title)
    shown = [window.tabs.tabText(i) for i in range(4)]
    assert len(set(shown)) == 4, shown
    assert shown[2:] == ["Notes", "Notes (2)"]
    assert all(len(text) <= 24 for text in shown[:2]) and shown[0].endswith("house keeper")
    assert [window.tabs.tabToolTip(i) for i in range(4)] == [
        f"{t}\nModel: fake-model" for t in titles
    ]
    # renaming one re-titles the others, and closing a twin frees its number
    window.close_tab(2)
    assert window.tabs.tabText(2) == "Notes"
    assert distinct_titles(["a" * 40, "a" * 40 + "b"]) != distinct_titles(["a" * 40, "a" * 40])


def test_overflowing_tabs_show_scroll_arrows(qtbot, window):
    window.resize(900, 700)
    for n in range(14):
        window.new_chat().controller.rename(f"Conversation number {n}")
    spin(lambda: False, 0.1)
    arrows = [b for b in window.tab_bar.findChildren(QToolButton) if b.isVisible()]
    assert len(arrows) == 2, "the tab bar's scroll arrows are hidden"
    for arrow in arrows:
        assert arrow.width() >= 18 and arrow.height() >= 18
    right = max(arrows, key=lambda b: b.x())
    image = right.grab().toImage()
    colours = {
        image.pixelColor(x, y).name() for x in range(image.width()) for y in range(image.height())
    }
    assert len(colours) > 3, "the arrow button draws no arrow"
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        for theme in ("light", "dark"):
            theme_manager().apply(theme)
            spin(lambda: False, 0.1)
            assert window.tabs.tabBar().grab().save(str(SHOTS / f"tabs-overflow-{theme}.png"))
    finally:
        theme_manager().apply("light")
    # every tab keeps its own short title: overflowing tabs scroll, they are not squeezed
    bar = window.tab_bar
    assert all(
        bar.tabRect(i).width() >= bar.fontMetrics().horizontalAdvance(bar.tabText(i))
        for i in range(bar.count())
    )
    window.tabs.setCurrentIndex(0)
    right.click()
    assert window.tabs.currentIndex() == 0  # the arrows scroll; they do not switch tabs

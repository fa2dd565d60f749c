"""A message's header (who wrote it, its badge, its stats and its actions) never makes the
message column wider than the view: on a 1440-pixel window with the side panel open, a reply
cut at max tokens ("cut at max tokens", its stats, Continue, Copy, Regenerate, ...) pushed
the column past the view's right edge, clipping every message of that chat."""

from __future__ import annotations

import pytest
from apphelpers import spin

from app.settings.chat_settings import ChatSettings

WIDTHS = (1440, 1100)


def _overflow(tab) -> int:
    """Pixels by which the widest message reaches past the view's visible width."""
    view = tab.view
    right = max(
        bubble.mapTo(view.viewport(), bubble.rect().topRight()).x() for bubble in view.bubbles()
    )
    return right - view.viewport().width()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reply_cut_at_max_tokens_fits_the_view(qtbot, window, fake_engine, width):
    window.resize(width, 900)
    window.show()
    tab = window.current_tab()
    tab.controller.set_settings(ChatSettings(max_tokens=4))
    fake_engine.reply = "one two three four five six seven eight nine"
    tab.send("Tell me a long story about a lighthouse keeper, please, with many chapters.")
    assert spin(lambda: not tab.controller.busy, 10)
    bubble = tab.view.bubble(1)
    assert bubble.badge_text() == "cut at max tokens" and bubble.continue_button.isVisible()
    assert spin(lambda: _overflow(tab) <= 0, 2), _overflow(tab)
    assert bubble.meta_label.text()  # the stats are still there, shortened if they must be
    buttons = (bubble.continue_button, bubble.copy_button, bubble.regenerate_button)

    def whole(button) -> bool:
        right = button.mapTo(tab.view.viewport(), button.rect().topRight()).x()
        wide = button.width() >= button.sizeHint().width()
        return button.isVisible() and wide and right <= tab.view.viewport().width()

    # the layout settles in the event loop: a button shown a moment ago may not be placed yet
    assert spin(lambda: all(whole(b) for b in buttons), 2), [b.width() for b in buttons]


def test_a_reply_written_in_a_tab_in_the_background_fits_when_shown(qtbot, window, fake_engine):
    """The clipped chat of the screenshot was a tab in the background while its reply came."""
    window.resize(1100, 900)
    window.show()
    first = window.current_tab()
    first.controller.set_settings(ChatSettings(max_tokens=4))
    fake_engine.reply = "one two three four five six seven eight nine"
    first.send("Tell me a long story about a lighthouse keeper, please, with many chapters.")
    second = window.new_chat()
    assert window.current_tab() is second
    assert spin(lambda: not first.controller.busy, 10)
    window.tabs.setCurrentWidget(first)
    copy = first.view.bubble(1).copy_button

    def settled() -> bool:  # the shown tab's layout settles in the event loop
        whole = copy.isVisible() and copy.width() >= copy.sizeHint().width()
        return whole and _overflow(first) <= 0

    assert spin(settled, 2), (copy.width(), _overflow(first))

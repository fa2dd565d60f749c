"""A message's action buttons at every width: none is ever squeezed below its size hint (a
clipped "Contin" was seen on CI) or past the message's edge, and every action the message
offers stays in reach, as a button or as an entry of the "⋯" menu."""

from __future__ import annotations

import pytest
from apphelpers import spin

from app.chat.message_bubble import COPIED_FEEDBACK_MS, MessageBubble
from app.store.records import Message, MessageStatus, Role
from app.theme import current_theme, ui_font

REPLY = Message(Role.ASSISTANT, "Once upon a time", status=MessageStatus.STOPPED, id=7)
QUEUED = Message(Role.USER, "and then?", status=MessageStatus.QUEUED)


def _bubble(qtbot, message: Message, *, owned: bool = True, **actions) -> MessageBubble:
    bubble = MessageBubble(message, theme=current_theme(), font=ui_font())
    if owned:  # closed by pytest-qt after the test
        qtbot.addWidget(bubble)
    bubble.set_actions(**actions)
    bubble.show()
    return bubble


def _buttons(bubble: MessageBubble):
    return (
        bubble.continue_button,
        bubble.send_now_button,
        bubble.cancel_button,
        bubble.copy_button,
        bubble.edit_button,
        bubble.regenerate_button,
        bubble.more_button,
    )


def _entry(bubble: MessageBubble, button):
    return next(a for a in bubble.more_button.menu().actions() if a.text() == button.text())


def _problems(bubble: MessageBubble) -> list[str]:
    """What is wrong with the bubble's actions as laid out now (empty: nothing)."""
    problems = []
    edge = bubble.contentsRect().right()
    for button in _buttons(bubble):
        if button.isVisible():
            if button.width() < button.sizeHint().width():
                problems.append(f"{button.text()} squeezed to {button.width()} px")
            if button.mapTo(bubble, button.rect().topRight()).x() > edge:
                problems.append(f"{button.text()} past the edge")
        elif bubble.action_row.offers(button) and button not in bubble.action_row.folded():
            problems.append(f"{button.text()} offered but out of reach")
    for button in bubble.action_row.folded():
        entry = _entry(bubble, button)
        if not (entry.isVisible() and bubble.more_button.isVisible()):
            problems.append(f"{button.text()} folded but not in the menu")
    return problems


def _at(bubble: MessageBubble, width: int) -> list[str]:
    bubble.resize(width, bubble.height())
    spin(lambda: not _problems(bubble), 0.5)
    return _problems(bubble)


@pytest.mark.parametrize(
    ("message", "actions", "narrowest"),
    [
        (REPLY, {"can_regenerate": True, "can_continue": True, "busy": False}, 120),
        (QUEUED, {"can_regenerate": False, "can_continue": False, "busy": False}, 100),
    ],
    ids=["reply", "queued"],
)
def test_no_action_is_squeezed_or_lost_at_any_width(qtbot, message, actions, narrowest):
    bubble = _bubble(qtbot, message, **actions)
    for width in [*range(900, narrowest, -7), *range(narrowest, 900, 11)]:
        assert _at(bubble, width) == [], width


def test_the_actions_fold_into_the_menu_in_order_and_work_from_there(qtbot):
    bubble = _bubble(qtbot, REPLY, can_regenerate=True, can_continue=True, busy=False)
    assert _at(bubble, 900) == [] and bubble.action_row.folded() == []
    assert bubble._header.indexOf(bubble.action_row) >= 0  # a wide message: all on the header
    seen = []
    for width in range(900, 60, -5):
        assert _at(bubble, width) == [], width
        if bubble.action_row.folded() != (seen[-1] if seen else []):
            seen.append(bubble.action_row.folded())
    order = [bubble.regenerate_button, bubble.copy_button, bubble.continue_button]
    assert [len(s) for s in seen] == sorted({len(s) for s in seen}) and len(seen) >= 2
    assert all(s == order[: len(s)] for s in seen), [[b.text() for b in s] for s in seen]
    if bubble.continue_button not in bubble.action_row.folded():
        bubble.resize(40, bubble.height())  # the message's narrowest
        assert spin(lambda: bubble.continue_button in bubble.action_row.folded(), 1)
    with qtbot.waitSignal(bubble.continueRequested, timeout=1000):
        _entry(bubble, bubble.continue_button).trigger()
    assert _at(bubble, 900) == [] and bubble.action_row.folded() == []
    assert not any(_entry(bubble, b).isVisible() for b in order)


def test_a_queued_message_folds_into_a_menu_of_its_own(qtbot):
    """A queued message offers no menu (no forking or deleting a message not sent yet), but
    a narrow one still keeps Send now and Cancel in reach."""
    bubble = _bubble(qtbot, QUEUED, can_regenerate=False, can_continue=False, busy=False)
    assert _at(bubble, 900) == [] and not bubble.more_button.isVisible()
    assert _at(bubble, 100) == [] and bubble.more_button.isVisible()
    assert bubble.send_now_button in bubble.action_row.folded()
    assert not bubble.fork_action.isVisible() and not bubble.delete_action.isVisible()
    with qtbot.waitSignal(bubble.sendQueuedRequested, timeout=1000):
        _entry(bubble, bubble.send_now_button).trigger()


def test_a_button_that_grows_is_placed_again(qtbot):
    """ "Copy" becomes "Copied" for a moment: the wider button must not be squeezed."""
    bubble = _bubble(qtbot, REPLY, can_regenerate=True, can_continue=True, busy=False)
    width = 900
    while _at(bubble, width - 1) == [] and bubble._header.indexOf(bubble.action_row) >= 0:
        width -= 1  # the narrowest message that still holds every action on its header
    assert _at(bubble, width) == [] and bubble._header.indexOf(bubble.action_row) >= 0
    bubble.copy_button.click()
    assert bubble.copy_button.text() == "Copied"
    assert spin(lambda: not _problems(bubble), 2), _problems(bubble)
    assert bubble._header.indexOf(bubble.action_row) < 0


def test_a_message_deleted_while_it_shows_copied_leaves_no_error(qtbot):
    """The "Copied" feedback ends on a timer; the message may be gone by then (its chat
    closed or switched): the timer goes with it."""
    bubble = _bubble(qtbot, REPLY, owned=False, can_regenerate=True, can_continue=True, busy=False)
    bubble.copy_button.click()
    bubble.deleteLater()
    spin(lambda: False, COPIED_FEEDBACK_MS / 1000 + 0.3)  # pytest-qt fails on a raised slot

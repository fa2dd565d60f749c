"""Widgets on their own: Markdown rendering with copyable code, the input box, themes, charts."""

from __future__ import annotations

from apphelpers import spin
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from app.chat.message_body import MessageBody, make_options
from app.chat.prompt_input import PromptInput
from app.panel.position_chart import PositionChart
from app.panel.sparkline import Sparkline
from app.theme import app_icon, load_theme, style_sheet, theme_manager, ui_font
from engine.requests import SpecStats

MARKDOWN = "Some **bold** and `inline`.\n\n```python\ndef f():\n    return 1\n```\n\nAfter.\n\n```\nplain\n```\n"


def _body(qtbot, text: str, **kw) -> MessageBody:
    body = MessageBody()
    qtbot.addWidget(body)
    body.resize(500, 100)
    body.set_content(text, options=make_options(load_theme("light"), ui_font(), **kw))
    return body


def test_markdown_code_blocks_are_monospace_with_copy_links(qtbot):
    body = _body(qtbot, MARKDOWN)
    assert body.code_blocks() == ["def f():\n    return 1", "plain"]
    doc = body.document()
    html = doc.toHtml()
    assert 'href="copy:0"' in html and 'href="copy:1"' in html
    assert "<b>" not in body.toPlainText() and "bold" in body.toPlainText()
    # the code text is in a fixed-pitch font
    cursor = doc.find("return 1")
    assert not cursor.isNull()
    assert cursor.charFormat().fontFixedPitch()
    # the copy link copies the block
    body.copy_code(0)
    assert QGuiApplication.clipboard().text() == "def f():\n    return 1"


def test_copy_link_click(qtbot):
    body = _body(qtbot, "```\nclick me\n```")
    body.show()
    qtbot.waitExposed(body)
    cursor = body.document().find("Copy")
    rect = body.cursorRect(cursor)
    QGuiApplication.clipboard().setText("")
    with qtbot.waitSignal(body.codeCopied, timeout=2000):
        qtbot.mouseClick(
            body.viewport(),
            Qt.MouseButton.LeftButton,
            pos=QPoint(rect.left() - 8, rect.center().y()),
        )
    assert QGuiApplication.clipboard().text() == "click me"


def test_streaming_unclosed_fence_renders(qtbot):
    body = _body(qtbot, "Here:\n\n```python\nx = 1\n")
    assert body.code_blocks() == ["x = 1"]


def test_user_text_is_plain_and_drafts_can_be_highlighted(qtbot):
    body = _body(qtbot, "**not bold**\nline two", plain=True)
    assert body.toPlainText() == "**not bold**\nline two"
    body = _body(qtbot, "from draft, not", draft_spans=[(0, 10)], highlight_drafts=True)
    cursor = body.document().find("from draft")
    assert cursor.charFormat().background().color().name() == load_theme("light").hex("draft")
    assert body.toPlainText() == "from draft, not"


def test_body_grows_with_text(qtbot):
    body = _body(qtbot, "one line")
    short = body.height()
    body.set_content(
        "\n\n".join(["paragraph"] * 8), options=make_options(load_theme("light"), ui_font())
    )
    assert body.height() > short * 3


def test_prompt_input_enter_sends_shift_enter_breaks_line(qtbot):
    box = PromptInput()
    qtbot.addWidget(box)
    sent = []
    box.submitted.connect(sent.append)
    qtbot.keyClicks(box, "hello")
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "world")
    assert box.toPlainText() == "hello\nworld" and sent == []
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert sent == ["hello\nworld"] and box.toPlainText() == ""
    qtbot.keyClick(box, Qt.Key.Key_Return)  # empty: nothing sent
    assert sent == ["hello\nworld"]


def test_themes_resolve_every_colour_and_load_icons(qapp):
    for name in ("light", "dark"):
        sheet = style_sheet(load_theme(name))
        assert "@" not in sheet, "an @placeholder was left unresolved"
        assert "close-" + name in sheet
    assert not app_icon().isNull()
    theme = theme_manager().apply("dark")
    assert theme.dark and qapp.palette().window().color().name() == theme.hex("window")
    theme_manager().apply("light")


def test_charts(qtbot):
    chart = PositionChart()
    spark = Sparkline()
    for w in (chart, spark):
        qtbot.addWidget(w)
        w.resize(200, 80)
    chart.set_rates(
        SpecStats(
            accepted_by_position=[3, 1, 0], drafted_by_position=[4, 4, 2]
        ).acceptance_by_position
    )
    spark.set_values([1.0, 3.0, 2.0])
    assert chart.rates() == [0.75, 0.25, 0.0] and spark.values() == [1.0, 3.0, 2.0]
    assert not chart.grab().isNull() and not spark.grab().isNull()
    assert spin(lambda: True, 0.1)


def test_singleton_refcounts_are_protected(qapp):
    import sys

    from app.qt_compat import binding_leaks

    leaks = binding_leaks()
    print(f"\nPySide6 reference leaks per 100 calls: {leaks}")
    if sys.version_info < (3, 12):
        assert sys.getrefcount(None) > 2**39 and sys.getrefcount(True) > 2**39


def test_draft_highlight_keeps_markdown(qtbot):
    from app.chat.markdown_render import source_to_document

    source = "Sure! Here are **three** tips:\n\n1. Keep it short.\n2. Use `bullets`.\n\n```bash\necho hello\n```\n\nBye now."
    spans = [(source.index("three"), source.index("three") + 5), (source.index("echo"), source.index("echo") + 10),
             (source.index("Bye"), source.index("Bye") + 3)]  # fmt: skip
    body = _body(qtbot, source, draft_spans=spans, highlight_drafts=True)
    doc = body.document()
    assert "**" not in body.toPlainText()  # still rendered as Markdown
    mapping = source_to_document(doc, source)
    for start, end in spans:
        assert "".join(doc.characterAt(mapping[i]) for i in range(start, end)) == source[start:end]
    draft = load_theme("light").hex("draft")
    for word in ("three", "echo hello", "Bye"):
        cursor = doc.find(word)
        cursor.setPosition(cursor.selectionStart() + 1)
        assert cursor.charFormat().background().color().name() == draft, word
    cursor = doc.find("Keep")
    assert cursor.charFormat().background().color().name() != draft


def test_code_blocks_are_syntax_coloured_by_pygments_in_both_themes(qtbot):
    from pygments.styles import get_style_by_name
    from pygments.token import Keyword, String

    from app.chat.code_highlight import CODE_STYLES

    source = '```python\ndef greet(name):\n    return "hi " + name  # say it\n```\n\n```\nplain text\n```'
    for theme_name in ("light", "dark"):
        theme = load_theme(theme_name)
        body = MessageBody()
        qtbot.addWidget(body)
        body.resize(500, 100)
        body.set_content(source, options=make_options(theme, ui_font()))
        doc = body.document()
        style = get_style_by_name(CODE_STYLES[theme_name])

        def colour(word: str, doc=doc) -> str:
            cursor = doc.find(word)
            cursor.setPosition(cursor.selectionStart() + 1)
            return cursor.charFormat().foreground().color().name()

        keyword = "#" + style.style_for_token(Keyword)["color"]
        string = "#" + style.style_for_token(String)["color"]
        assert colour("def") == keyword.lower() and colour("return") == keyword.lower()
        assert colour('"hi') == string.lower()
        assert colour("def") != colour("greet") != theme.hex("code_text")
        assert colour("plain text") == theme.hex("code_text")  # no language: not guessed
        assert body.code_blocks()[0].startswith("def greet(name):")


def test_copy_link_says_copied_for_a_moment(qtbot, monkeypatch):
    import app.chat.message_body as message_body

    monkeypatch.setattr(message_body, "COPIED_FEEDBACK_MS", 80)
    source = "Intro.\n\n```\nfirst\n```\n\n```\nsecond\n```\n\nEnd."
    body = _body(qtbot, source, draft_spans=[(0, 6)], highlight_drafts=True)
    body.show()
    qtbot.waitExposed(body)
    links = lambda: [  # noqa: E731
        body.document().find(text).isNull() is False for text in ("Copied ✓", "Copy")
    ]
    assert body.code_blocks() == ["first", "second"]  # two fences in a row stay two blocks
    body.copy_code(1)
    assert QGuiApplication.clipboard().text() == "second"
    assert links() == [True, True]  # block 1 says Copied, block 0 still says Copy
    html = body.document().toHtml()
    assert 'href="copy:0"' in html and 'href="copy:1"' in html  # the link still works
    assert spin(lambda: body.document().find("Copied ✓").isNull(), 2)
    assert body.document().toPlainText().count("Copy") == 2


def test_the_folder_dialog_blocks_only_its_window_asks_for_a_folder_and_hands_it_on(
    qtbot, tmp_path
):
    from PySide6.QtWidgets import QFileDialog, QWidget

    from app.widgets.folder_dialog import open_folder_dialog

    parent = QWidget()
    qtbot.addWidget(parent)
    chosen: list[str] = []
    dialog = open_folder_dialog(parent, "Add a model folder", chosen.append)
    try:
        assert dialog.isVisible()  # open(): modal to its window only, the app runs on
        assert dialog.windowModality() == Qt.WindowModality.WindowModal
        assert dialog.fileMode() == QFileDialog.FileMode.Directory
        assert dialog.windowTitle() == "Add a model folder"
        dialog.fileSelected.emit(str(tmp_path))
        assert chosen == [str(tmp_path)]
    finally:
        dialog.reject()


def test_the_folder_dialog_opens_at_home_then_beside_the_last_folder_picked(
    qtbot, tmp_path, monkeypatch
):
    """Never in the folder the app was started from."""
    from pathlib import Path

    from PySide6.QtWidgets import QWidget

    from app.widgets import folder_dialog

    monkeypatch.setattr(folder_dialog, "_last_parent", None)
    monkeypatch.chdir(tmp_path)
    parent = QWidget()
    qtbot.addWidget(parent)
    first = folder_dialog.open_folder_dialog(parent, "Add a model folder", lambda _: None)
    try:
        assert Path(first.directory().absolutePath()) == Path.home().resolve()
        models = tmp_path / "models" / "qwen"
        models.mkdir(parents=True)
        first.fileSelected.emit(str(models))
    finally:
        first.reject()
    second = folder_dialog.open_folder_dialog(parent, "Add a model folder", lambda _: None)
    try:
        assert Path(second.directory().absolutePath()) == (tmp_path / "models").resolve()
    finally:
        second.reject()

"""Markdown into a QTextDocument, styled for the chat: code blocks become a framed table with
the language and a "Copy" link (anchor copy:N) over syntax-coloured monospace, inline code gets a
tint, and replies can show the characters that came from accepted drafts."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextLength,
    QTextTableFormat,
)

from app.chat.code_highlight import highlight
from app.theme import Theme, monospace_font

COPY_SCHEME = "copy"
COPY_TEXT = "Copy"
COPIED_TEXT = "Copied ✓"
DEFAULT_CODE_PADDING = 8
CODE_FONT_SCALE = 0.95


@dataclass
class RenderResult:
    code_blocks: list[str] = field(default_factory=list)  # index N is what copy:N copies


@dataclass(frozen=True)
class RenderOptions:
    theme: Theme
    base_font: QFont
    draft_spans: tuple[tuple[int, int], ...] = ()  # [start, end) in the source text
    highlight_drafts: bool = False
    plain: bool = False  # user messages: no Markdown, keep the text as typed


def render(doc: QTextDocument, text: str, *, options: RenderOptions) -> RenderResult:
    doc.setDefaultFont(options.base_font)
    doc.setDocumentMargin(0)
    if options.plain:
        doc.setHtml(_plain_html(text, options))
        return RenderResult()
    doc.setMarkdown(text, QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    _style_inline(doc, options)
    blocks = _frame_code_blocks(doc, text, options)
    if options.highlight_drafts and options.draft_spans:
        _highlight(doc, text, options)
    return RenderResult(code_blocks=blocks)


def source_to_document(doc: QTextDocument, source: str) -> list[int]:
    """For each character of the Markdown source, its position in the rendered document, or
    -1 where it is markup (list markers, backticks, fences...). A greedy alignment: a source
    character maps to the next document character equal to it; whitespace matches whitespace."""
    rendered: list[str | None] = [doc.characterAt(pos) for pos in range(doc.characterCount())]
    for start, end in _inserted_links(doc):
        rendered[start:end] = [None] * (end - start)  # our "Copy" links are not in the source
    out = [-1] * len(source)
    j, n = 0, len(rendered)
    for i, ch in enumerate(source):
        while j < n and (rendered[j] is None or (rendered[j] in _FRAME_MARKS and not ch.isspace())):
            j += 1
        if j >= n:
            break
        target = rendered[j]
        if ch == target or (ch.isspace() and (target.isspace() or target in _SEPARATORS)):
            out[i] = j
            j += 1
    return out


_FRAME_MARKS = ("\ufdd0", "\ufdd1")  # where a table (our code blocks) begins and ends
_SEPARATORS = ("\u2029", "\u2028", *_FRAME_MARKS)


def _copy_links(doc: QTextDocument) -> dict[int, tuple[int, int]]:
    """Code block index -> [start, end) of the copy link `_frame_code_blocks` added for it."""
    found: dict[int, tuple[int, int]] = {}
    prefix = COPY_SCHEME + ":"
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            href = fragment.charFormat().anchorHref()
            if href.startswith(prefix) and href[len(prefix) :].isdigit():
                start = fragment.position()
                found[int(href[len(prefix) :])] = (start, start + fragment.length())
            it += 1
        block = block.next()
    return found


def _inserted_links(doc: QTextDocument) -> list[tuple[int, int]]:
    """[start, end) of the copy links `_frame_code_blocks` added."""
    return sorted(_copy_links(doc).values())


def set_copy_label(doc: QTextDocument, index: int, text: str) -> bool:
    """Relabel code block `index`'s copy link (e.g. "Copied ✓"); False if it is not there."""
    span = _copy_links(doc).get(index)
    if span is None:
        return False
    cursor = QTextCursor(doc)
    cursor.setPosition(span[0])
    cursor.setPosition(span[1], QTextCursor.MoveMode.KeepAnchor)
    fmt = cursor.charFormat()
    cursor.insertText(text, fmt)
    return True


def _highlight(doc: QTextDocument, source: str, options: RenderOptions) -> None:
    """Tint the rendered characters whose source came from accepted draft tokens."""
    mapping = source_to_document(doc, source)
    positions = sorted(
        mapping[i]
        for start, end in options.draft_spans
        for i in range(max(0, start), min(end, len(mapping)))
        if mapping[i] >= 0
    )
    tint = QTextCharFormat()
    tint.setBackground(options.theme.color("draft"))
    tint.setForeground(options.theme.color("draft_text"))
    last = doc.characterCount() - 1  # the final paragraph separator cannot be selected
    run_start = previous = None
    for pos in positions + [None]:
        if run_start is not None and (pos is None or pos != previous + 1):
            end = min(previous + 1, last)
            if end > run_start:
                cursor = QTextCursor(doc)
                cursor.setPosition(run_start)
                cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(tint)
            run_start = None
        if pos is not None and run_start is None:
            run_start = pos
        previous = pos


def _plain_html(text: str, options: RenderOptions) -> str:
    """The text as typed (pre-wrap), with draft spans tinted when asked (user messages)."""
    theme = options.theme
    spans = sorted(options.draft_spans) if options.highlight_drafts else []
    parts: list[str] = []
    at = 0
    for start, end in spans:
        start, end = max(start, at), min(end, len(text))
        if end <= start:
            continue
        parts.append(html.escape(text[at:start]))
        parts.append(
            f'<span style="background-color:{theme.hex("draft")};color:{theme.hex("draft_text")}">'
            f"{html.escape(text[start:end])}</span>"
        )
        at = end
    parts.append(html.escape(text[at:]))
    body = "".join(parts).replace("\n", "<br>")
    return f'<div style="white-space: pre-wrap">{body}</div>'


def _style_inline(doc: QTextDocument, options: RenderOptions) -> None:
    """Tint inline code and colour links with the theme's accent."""
    theme = options.theme
    mono = monospace_font(options.base_font.pointSizeF() * CODE_FONT_SCALE)
    block = doc.begin()
    while block.isValid():
        if block.blockFormat().hasProperty(QTextFormat.Property.BlockQuoteLevel):
            quote = QTextCharFormat()
            quote.setForeground(theme.color("text_muted"))
            quote.setFontItalic(True)
            cursor = QTextCursor(block)
            cursor.movePosition(
                QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor
            )
            cursor.mergeCharFormat(quote)
        if not block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                fmt = fragment.charFormat()
                change = QTextCharFormat()
                if fmt.fontFixedPitch() or fmt.fontFamilies() == ["monospace"]:
                    change.setFont(
                        mono,
                        QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly,
                    )
                    change.setFontFamilies(mono.families() or [mono.family()])
                    change.setBackground(theme.color("inline_code_bg"))
                if fmt.isAnchor():
                    change.setForeground(theme.color("accent"))
                    change.setFontUnderline(False)
                if change.propertyCount():
                    cursor = QTextCursor(doc)
                    cursor.setPosition(fragment.position())
                    cursor.setPosition(
                        fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor
                    )
                    cursor.mergeCharFormat(change)
                it += 1
        block = block.next()


def fence_line_counts(source: str) -> list[int]:
    """Lines of code in each fenced block of the Markdown source, in order (an unclosed last
    fence, as while a reply streams, counts what it has so far)."""
    counts: list[int] = []
    fence: str | None = None
    lines = 0
    for line in source.split("\n"):
        match = _FENCE.match(line)
        if fence is None:
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence, lines = match.group(1), 0
        elif (
            match
            and match.group(1)[0] == fence[0]
            and len(match.group(1)) >= len(fence)
            and not match.group(2).strip()
        ):
            counts.append(lines)
            fence = None
        else:
            lines += 1
    if fence is not None:
        counts.append(lines)
    return counts


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _code_groups(doc: QTextDocument, source: str) -> list[tuple[int, int, str, str]]:
    """(start, end, language, code) of each fenced code block. Qt's blocks do not say where one
    fence ends and the next begins when nothing stands between them: the source's line counts
    (or a change of language) do."""
    counts = fence_line_counts(source)
    groups: list[tuple[int, int, str, str]] = []
    current: list | None = None

    def close() -> None:
        groups.append((current[0], current[1], current[2], "\n".join(current[3])))

    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence):
            language = fmt.stringProperty(QTextFormat.Property.BlockCodeLanguage)
            expected = counts[len(groups)] if len(groups) < len(counts) else None
            if current is not None and (
                language != current[2] or (expected and len(current[3]) >= expected)
            ):
                close()
                current = None
            if current is None:
                current = [block.position(), 0, language, []]
            current[1] = block.position() + block.length() - 1
            current[3].append(block.text())
        elif current is not None:
            close()
            current = None
        block = block.next()
    if current is not None:
        close()
    return groups


def _frame_code_blocks(doc: QTextDocument, source: str, options: RenderOptions) -> list[str]:
    theme = options.theme
    groups = _code_groups(doc, source)
    mono = monospace_font(options.base_font.pointSizeF() * CODE_FONT_SCALE)
    small = QFont(options.base_font)
    small.setPointSizeF(options.base_font.pointSizeF() * 0.85)
    for index in range(len(groups) - 1, -1, -1):
        start, end, language, code = groups[index]
        cursor = QTextCursor(doc)
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(QTextBlockFormat())
        table = cursor.insertTable(2, 1, _table_format(theme))
        # header: language on the left, the copy link after it
        head = table.cellAt(0, 0)
        head_format = head.format().toTableCellFormat()
        head_format.setBackground(theme.color("sunken"))
        head.setFormat(head_format)
        head_cursor = head.firstCursorPosition()
        label = QTextCharFormat()
        label.setFont(small)
        label.setForeground(theme.color("text_muted"))
        head_cursor.insertText((language or "code") + "\u2003", label)
        link = QTextCharFormat()
        link.setFont(small)
        link.setAnchor(True)
        link.setAnchorHref(f"{COPY_SCHEME}:{index}")
        link.setForeground(theme.color("accent"))
        link.setToolTip("Copy this code")
        head_cursor.insertText(COPY_TEXT, link)
        # body: the code, monospace, as is
        body = table.cellAt(1, 0)
        body_format = body.format().toTableCellFormat()
        body_format.setBackground(theme.color("code_bg"))
        body.setFormat(body_format)
        body_cursor = body.firstCursorPosition()
        code_format = QTextCharFormat()
        code_format.setFont(mono)
        code_format.setFontFixedPitch(True)
        code_format.setForeground(theme.color("code_text"))
        block_format = QTextBlockFormat()
        block_format.setNonBreakableLines(True)
        body_cursor.setBlockFormat(block_format)
        for run in highlight(code, language, theme=theme.name):
            run_format = QTextCharFormat(code_format)
            if run.color:
                run_format.setForeground(QColor(run.color))
            if run.bold:
                run_format.setFontWeight(QFont.Weight.Bold)
            if run.italic:
                run_format.setFontItalic(True)
            body_cursor.insertText(run.text, run_format)
    return [group[3] for group in groups]


def _table_format(theme: Theme) -> QTextTableFormat:
    fmt = QTextTableFormat()
    fmt.setBorder(1)
    fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    fmt.setBorderBrush(QBrush(QColor(theme.hex("code_border"))))
    fmt.setBorderCollapse(True)
    fmt.setCellPadding(DEFAULT_CODE_PADDING)
    fmt.setCellSpacing(0)
    fmt.setMargin(0)
    fmt.setTopMargin(4)
    fmt.setBottomMargin(8)
    fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
    return fmt

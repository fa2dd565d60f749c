"""Syntax colours for fenced code: Pygments lexes the code and a Pygments style made for the
theme's background colours it (the same lexer and style data as Pygments' HTML formatter with
inline styles, without the detour through HTML)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.style import StyleMeta
from pygments.styles import get_style_by_name
from pygments.token import Token, _TokenType
from pygments.util import ClassNotFound

# Chosen for the code block backgrounds of themes.json (code_bg): dark text on near-white,
# light text on near-black.
CODE_STYLES = {"light": "default", "dark": "github-dark"}
DEFAULT_CACHE_SIZE = 256  # recently highlighted blocks (a streaming reply re-renders often)


@dataclass(frozen=True)
class CodeRun:
    """A stretch of code in one colour and weight; color None: the theme's code text colour."""

    text: str
    color: str | None = None  # "#rrggbb"
    bold: bool = False
    italic: bool = False


def highlight(code: str, language: str, *, theme: str) -> tuple[CodeRun, ...]:
    """`code` as coloured runs; one plain run when the language is unknown or not given."""
    return _highlight(code, language.strip().lower(), CODE_STYLES.get(theme, CODE_STYLES["light"]))


@lru_cache(maxsize=DEFAULT_CACHE_SIZE)
def _highlight(code: str, language: str, style_name: str) -> tuple[CodeRun, ...]:
    lexer = _lexer(language)
    if lexer is None:
        return (CodeRun(code),)
    style = get_style_by_name(style_name)
    runs: list[CodeRun] = []
    for token_type, text in lexer.get_tokens(code):
        run = _run(style, token_type, text)
        last = runs[-1] if runs else None
        if last is not None and (last.color, last.bold, last.italic) == (
            run.color,
            run.bold,
            run.italic,
        ):
            runs[-1] = CodeRun(last.text + text, last.color, last.bold, last.italic)
        else:
            runs.append(run)
    if runs and runs[-1].text.endswith("\n") and not code.endswith("\n"):
        last = runs[-1]  # lexers add a final newline
        runs[-1] = CodeRun(last.text[:-1], last.color, last.bold, last.italic)
    return tuple(run for run in runs if run.text)


@cache
def _lexer(language: str) -> Lexer | None:
    if not language:
        return None
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _run(style: StyleMeta, token_type: _TokenType, text: str) -> CodeRun:
    if token_type in Token.Text:  # whitespace and plain text: the theme's code colour
        return CodeRun(text)
    info = style.style_for_token(token_type)
    color = f"#{info['color']}" if info["color"] else None
    return CodeRun(text, color, bool(info["bold"]), bool(info["italic"]))

"""Light and dark themes: colours from resources/themes.json, style sheets from resources/*.qss,
following the system's colour scheme unless the user picks one."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QIcon,
    QPainter,
    QPalette,
    QPixmap,
)
from PySide6.QtWidgets import QApplication

THEME_MODES = ("system", "light", "dark")
DEFAULT_THEME_MODE = "system"
DEFAULT_FONT_POINT_SIZE = 10.0
DEFAULT_STYLE = "Fusion"
_PLACEHOLDER = re.compile(r"@([a-z_]+)")
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_PREFERRED_UI_FONTS = ("Inter", "Segoe UI", "SF Pro Text", "Cantarell", "Noto Sans", "DejaVu Sans")
_PREFERRED_MONO_FONTS = ("JetBrains Mono", "SF Mono", "Menlo", "Cascadia Mono", "Consolas",
                         "DejaVu Sans Mono")  # fmt: skip


@dataclass(frozen=True)
class Theme:
    name: str  # "light" or "dark"
    colors: dict[str, str]

    @property
    def dark(self) -> bool:
        return self.name == "dark"

    def color(self, key: str) -> QColor:
        """The colour; themes.json writes alpha last (#rrggbbaa), as CSS does."""
        value = self.colors[key]
        if value.startswith("#") and len(value) == 9:
            color = QColor(value[:7])
            color.setAlpha(int(value[7:9], 16))
            return color
        return QColor(value)

    def hex(self, key: str) -> str:
        """The colour as #rrggbb (HTML in QTextDocument does not read alpha)."""
        return self.color(key).name()


@cache
def _palettes() -> dict[str, dict[str, str]]:
    text = resources.files("resources").joinpath("themes.json").read_text(encoding="utf-8")
    return json.loads(text)


def load_theme(name: str) -> Theme:
    return Theme(name=name, colors=dict(_palettes()[name]))


def style_sheet(theme: Theme) -> str:
    """style.qss plus the theme's own sheet, with @name replaced by the theme's colours."""
    folder = resources.files("resources")
    text = folder.joinpath("style.qss").read_text(encoding="utf-8")
    text += "\n" + folder.joinpath(f"{theme.name}.qss").read_text(encoding="utf-8")
    text = _COMMENT.sub("", text)
    values = dict(theme.colors)
    values["icons"] = _icons_dir()
    values["theme"] = theme.name
    return _PLACEHOLDER.sub(lambda m: _qss_color(values.get(m.group(1), m.group(0))), text)


@cache
def _icons_dir() -> str:
    """resources/icons as a folder path (QSS url() needs a file); forward slashes on Windows."""
    folder = resources.files("resources").joinpath("icons")
    return str(folder).replace("\\", "/")


def _qss_color(value: str) -> str:
    """QSS reads #aarrggbb, themes.json writes #rrggbbaa."""
    if value.startswith("#") and len(value) == 9:
        return "#" + value[7:9] + value[1:7]
    return value


def app_icon() -> QIcon:
    icon = QIcon()
    folder = resources.files("resources")
    with resources.as_file(folder.joinpath("icon.png")) as png:
        icon.addFile(str(png))
    with resources.as_file(folder.joinpath("icon.svg")) as svg:
        icon.addFile(str(svg))
    return icon


def busy_icon(size: int = 12) -> QIcon:
    """A small accent-coloured dot: a tab whose reply is being written."""
    pixmap = QPixmap(size * 2, size * 2)
    pixmap.setDevicePixelRatio(2.0)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(current_theme().color("accent"))
    painter.drawEllipse(2, 2, size - 4, size - 4)
    painter.end()
    return QIcon(pixmap)


def monospace_font(point_size: float | None = None) -> QFont:
    families = set(QFontDatabase.families())
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    for family in _PREFERRED_MONO_FONTS:
        if family in families:
            font = QFont(family)
            break
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setFixedPitch(True)
    if point_size:
        font.setPointSizeF(point_size)
    return font


def ui_font(point_size: float = DEFAULT_FONT_POINT_SIZE) -> QFont:
    families = set(QFontDatabase.families())
    font = QFont(QGuiApplication.font())
    for family in _PREFERRED_UI_FONTS:
        if family in families:
            font.setFamily(family)
            break
    font.setPointSizeF(point_size)
    return font


def _palette(theme: Theme) -> QPalette:
    c = theme.color
    palette = QPalette()
    role = QPalette.ColorRole
    palette.setColor(role.Window, c("window"))
    palette.setColor(role.WindowText, c("text"))
    palette.setColor(role.Base, c("surface"))
    palette.setColor(role.AlternateBase, c("surface_alt"))
    palette.setColor(role.Text, c("text"))
    palette.setColor(role.PlaceholderText, c("text_faint"))
    palette.setColor(role.Button, c("surface"))
    palette.setColor(role.ButtonText, c("text"))
    palette.setColor(role.Highlight, c("accent"))
    palette.setColor(role.HighlightedText, c("accent_text"))
    palette.setColor(role.Link, c("accent"))
    palette.setColor(role.ToolTipBase, c("surface"))
    palette.setColor(role.ToolTipText, c("text"))
    palette.setColor(role.Mid, c("border_strong"))
    palette.setColor(role.Midlight, c("border"))
    palette.setColor(role.Light, c("surface"))
    palette.setColor(role.Dark, c("border_strong"))
    for r in (role.Text, role.WindowText, role.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, r, c("text_faint"))
    return palette


class ThemeManager(QObject):
    """Holds the active theme; `changed` fires when it changes (custom-painted widgets and
    rendered Markdown listen to it)."""

    changed = Signal(object)  # Theme

    def __init__(self) -> None:
        super().__init__()
        self.mode = DEFAULT_THEME_MODE
        self.theme = load_theme("light")
        self._following = False

    def apply(self, mode: str = DEFAULT_THEME_MODE) -> Theme:
        app = QApplication.instance()
        self.mode = mode if mode in THEME_MODES else DEFAULT_THEME_MODE
        hints = QGuiApplication.styleHints()
        if not self._following:
            hints.colorSchemeChanged.connect(self._system_changed)
            self._following = True
        name = self.mode
        if name == "system":
            name = "dark" if hints.colorScheme() == Qt.ColorScheme.Dark else "light"
        self.theme = load_theme(name)
        if app is not None:
            app.setStyle(DEFAULT_STYLE)
            app.setPalette(_palette(self.theme))
            app.setStyleSheet(style_sheet(self.theme))
        self.changed.emit(self.theme)
        return self.theme

    def _system_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self.mode == "system":
            self.apply("system")


_manager: ThemeManager | None = None


def theme_manager() -> ThemeManager:
    global _manager
    if _manager is None:
        _manager = ThemeManager()
    return _manager


def current_theme() -> Theme:
    return theme_manager().theme

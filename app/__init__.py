"""Tandem's desktop app: Qt only. It talks to the engine through `engine.api` and the plain
dataclasses of `engine.requests`; it never calls MLX itself."""

from app.qt_compat import protect_singleton_refcounts as _protect_singleton_refcounts

_protect_singleton_refcounts()  # PySide6 6.12 on Python 3.11 leaks None/True refs: see qt_compat

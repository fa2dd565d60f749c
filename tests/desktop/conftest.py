"""The desktop tests' X server (tests/desktop/x_session.py)."""

from tests.desktop.x_session import x_display  # noqa: F401

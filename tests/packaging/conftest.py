"""packaging/ is a folder of scripts (and the build backend), not a package: its modules are
imported by name here, as packaging/tandem.spec and pyproject.toml's backend-path do. The X
server fixture is the desktop tests' own."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "packaging"))

from tests.desktop.x_session import x_display  # noqa: E402,F401

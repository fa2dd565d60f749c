"""Where Tandem keeps its data: platformdirs' user data folder, or $TANDEM_DATA_DIR."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "tandem"
DATA_DIR_ENV = "TANDEM_DATA_DIR"
DATABASE_NAME = "tandem.sqlite3"


def data_dir(override: str | os.PathLike | None = None) -> Path:
    """The data folder (created if needed): `override`, else $TANDEM_DATA_DIR, else the
    platform's user data folder."""
    chosen = override or os.environ.get(DATA_DIR_ENV) or platformdirs.user_data_dir(APP_NAME)
    path = Path(chosen).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_path(override: str | os.PathLike | None = None) -> Path:
    return data_dir(override) / DATABASE_NAME

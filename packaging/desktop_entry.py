"""Install or remove Tandem's launcher for the current user (freedesktop XDG folders): the
.desktop file in $XDG_DATA_HOME/applications and the icon in $XDG_DATA_HOME/icons/hicolor.

    python packaging/desktop_entry.py install [--exec PATH]
    python packaging/desktop_entry.py uninstall

`make install-desktop` / `make uninstall-desktop` run these. The launcher starts the bundle from
`make package` (dist/tandem/tandem) when there is one, else the checkout's .venv/bin/tandem.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from icons import HICOLOR_SIZES, ICON_NAME, gui_app, hicolor_path, write_icons  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "packaging" / "linux" / "tandem.desktop"
DESKTOP_ID = "tandem.desktop"  # app/main.py: setDesktopFileName("tandem")
EXEC_CANDIDATES = (ROOT / "dist" / "tandem" / "tandem", ROOT / ".venv" / "bin" / "tandem")
EXEC_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def data_home() -> Path:
    """$XDG_DATA_HOME, else ~/.local/share (the XDG Base Directory default)."""
    value = os.environ.get("XDG_DATA_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".local" / "share"


def installed_paths(home: Path) -> list[Path]:
    """Every file `install` writes under `home` (the XDG data folder)."""
    icons = home / "icons"
    return [
        home / "applications" / DESKTOP_ID,
        *(hicolor_path(icons, size) for size in HICOLOR_SIZES),
        icons / "hicolor" / "scalable" / "apps" / f"{ICON_NAME}.svg",
    ]


def default_exec() -> Path:
    """The bundle if `make package` built one, else the checkout's venv entry point."""
    for path in EXEC_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    raise SystemExit(
        "No Tandem program to launch: run `make package` (a bundle in dist/tandem/) or "
        "`make setup` (.venv/bin/tandem) first, or pass --exec PATH."
    )


def exec_value(program: Path) -> str:
    """`program` as a desktop entry Exec value: quoted if needed, then escaped as a string."""
    text = str(program).replace("%", "%%")
    if any(ch in EXEC_RESERVED for ch in text):
        inner = "".join("\\" + ch if ch in '"`$\\' else ch for ch in text)
        text = f'"{inner}"'
    return text.replace("\\", "\\\\")


def desktop_entry(program: Path) -> str:
    """The template with Exec and TryExec pointing at `program`."""
    lines = []
    for line in TEMPLATE.read_text(encoding="utf-8").splitlines():
        if line.startswith("Exec="):
            lines.append(f"Exec={exec_value(program)}")
            lines.append(f"TryExec={str(program).replace(chr(92), chr(92) * 2)}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def install(program: Path, home: Path) -> list[Path]:
    """Write the launcher and icons under `home`; returns the files written."""
    entry = home / "applications" / DESKTOP_ID
    entry.parent.mkdir(parents=True, exist_ok=True)
    partial = entry.with_name(entry.name + ".partial")
    partial.write_text(desktop_entry(program), encoding="utf-8")
    os.replace(partial, entry)  # a menu never reads half a file
    write_icons(home / "icons", icns=False)
    _refresh_caches(home)
    return installed_paths(home)


def uninstall(home: Path) -> list[Path]:
    """Remove what `install` wrote under `home`; returns the files removed."""
    removed = []
    for path in installed_paths(home):
        if path.exists():
            path.unlink()
            removed.append(path)
    _refresh_caches(home)
    return removed


def _refresh_caches(home: Path) -> None:
    """Update the user's icon cache if there is one (GTK trusts a stale cache over the folder);
    desktops watch the applications folder themselves."""
    hicolor = home / "icons" / "hicolor"
    if (hicolor / "icon-theme.cache").exists() and shutil.which("gtk-update-icon-cache"):
        subprocess.run(["gtk-update-icon-cache", "-q", "-t", "-f", str(hicolor)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("install", help="install the launcher and icons")
    add.add_argument("--exec", type=Path, help="the program the launcher starts")
    sub.add_parser("uninstall", help="remove them")
    args = parser.parse_args(argv)
    if sys.platform == "darwin":
        raise SystemExit("On macOS, drag dist/Tandem.app (make package) into Applications.")
    home = data_home()
    if args.command == "install":
        program = (args.exec or default_exec()).resolve()
        gui_app()
        paths = install(program, home)
        print(f"Installed {paths[0]} (starts {program}) and {len(paths) - 1} icons")
    else:
        removed = uninstall(home)
        print(f"Removed {len(removed)} files from {home}" if removed else "Nothing to remove")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Can Qt open a window here? Asked before the QApplication exists, so that a missing system
library or display gets one clear line naming all of them, instead of Qt's abort naming one.

Stdlib only: `make setup` runs this file with the system Python, before the venv exists, to
learn which Debian/Ubuntu packages to install (`python3 app/platform_check.py --missing-packages`).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

EXIT_NO_WINDOW = 2
GUI = "gui"  # what QtGui itself links against, whatever the platform plugin
XCB = "xcb"
WAYLAND = "wayland"
PLATFORM_TITLES = {GUI: "Qt's GUI", XCB: "the X11 (xcb) platform", WAYLAND: "the Wayland platform"}
DISPLAY_VARIABLES = {XCB: "DISPLAY", WAYLAND: "WAYLAND_DISPLAY"}
OFFSCREEN_HINT = "to run it without a screen (for tests): QT_QPA_PLATFORM=offscreen python -m app"


@dataclass(frozen=True)
class SystemLibrary:
    """A shared library Qt loads from the system, and the Debian/Ubuntu package that has it."""

    soname: str
    package: str
    platform: str  # GUI, XCB or WAYLAND


# What PySide6 6.12's QtGui/QtWidgets and its xcb and Wayland platform plugins (with their GL,
# shell and decoration plugins) link against (`readelf -d`: NEEDED), less the C/C++ runtime and
# zlib/zstd. Each package pulls in what its library needs in turn.
# tests/desktop/test_platform_check.py checks this list against the installed wheel.
SYSTEM_LIBRARIES = (
    SystemLibrary("libGL.so.1", "libgl1", GUI),
    SystemLibrary("libEGL.so.1", "libegl1", GUI),
    SystemLibrary("libX11.so.6", "libx11-6", GUI),
    SystemLibrary("libxkbcommon.so.0", "libxkbcommon0", GUI),
    SystemLibrary("libfontconfig.so.1", "libfontconfig1", GUI),
    SystemLibrary("libfreetype.so.6", "libfreetype6", GUI),
    SystemLibrary("libglib-2.0.so.0", "libglib2.0-0", GUI),
    SystemLibrary("libgthread-2.0.so.0", "libglib2.0-0", GUI),
    SystemLibrary("libdbus-1.so.3", "libdbus-1-3", GUI),
    SystemLibrary("libxcb.so.1", "libxcb1", XCB),
    SystemLibrary("libX11-xcb.so.1", "libx11-xcb1", XCB),
    SystemLibrary("libxkbcommon-x11.so.0", "libxkbcommon-x11-0", XCB),
    SystemLibrary("libxcb-cursor.so.0", "libxcb-cursor0", XCB),
    SystemLibrary("libxcb-icccm.so.4", "libxcb-icccm4", XCB),
    SystemLibrary("libxcb-keysyms.so.1", "libxcb-keysyms1", XCB),
    SystemLibrary("libxcb-image.so.0", "libxcb-image0", XCB),
    SystemLibrary("libxcb-util.so.1", "libxcb-util1", XCB),
    SystemLibrary("libxcb-randr.so.0", "libxcb-randr0", XCB),
    SystemLibrary("libxcb-render.so.0", "libxcb-render0", XCB),
    SystemLibrary("libxcb-render-util.so.0", "libxcb-render-util0", XCB),
    SystemLibrary("libxcb-shape.so.0", "libxcb-shape0", XCB),
    SystemLibrary("libxcb-shm.so.0", "libxcb-shm0", XCB),
    SystemLibrary("libxcb-sync.so.1", "libxcb-sync1", XCB),
    SystemLibrary("libxcb-xfixes.so.0", "libxcb-xfixes0", XCB),
    SystemLibrary("libxcb-xkb.so.1", "libxcb-xkb1", XCB),
    SystemLibrary("libxcb-glx.so.0", "libxcb-glx0", XCB),
    SystemLibrary("libwayland-client.so.0", "libwayland-client0", WAYLAND),
    SystemLibrary("libwayland-cursor.so.0", "libwayland-cursor0", WAYLAND),
    SystemLibrary("libwayland-egl.so.1", "libwayland-egl1", WAYLAND),
)

Loader = Callable[[str], bool]


def can_load(soname: str) -> bool:
    """Whether the dynamic linker finds `soname` (and what it needs) as Qt's plugins would."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing_libraries(
    platforms: tuple[str, ...] = (GUI, XCB, WAYLAND), *, loader: Loader | None = None
) -> list[SystemLibrary]:
    """The libraries of `platforms` that do not load here."""
    loads = loader or can_load
    return [lib for lib in SYSTEM_LIBRARIES if lib.platform in platforms and not loads(lib.soname)]


def qt_platforms(env: Mapping[str, str]) -> list[str]:
    """The platform plugins Qt will try, in order (Qt 6: Wayland first in a Wayland session)."""
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        return [name.split(":")[0].strip() for name in chosen.split(";") if name.strip()]
    wayland = env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE") == "wayland"
    return [WAYLAND, XCB] if wayland else [XCB]


def has_display(platform: str, env: Mapping[str, str]) -> bool:
    if platform == XCB:
        return bool(env.get("DISPLAY"))
    socket = env.get("WAYLAND_DISPLAY") or "wayland-0"
    return os.path.exists(os.path.join(env.get("XDG_RUNTIME_DIR", ""), socket))


def window_problem(
    env: Mapping[str, str] | None = None,
    *,
    system: str = sys.platform,
    loader: Loader | None = None,
    apt: bool | None = None,
) -> str | None:
    """One line saying why Qt cannot open a window here, or None when nothing is known to stop
    it. Only Linux's xcb and Wayland platforms are checked; others are left to Qt."""
    if not system.startswith("linux"):
        return None
    env = os.environ if env is None else env
    apt = shutil.which("apt-get") is not None if apt is None else apt
    gui = missing_libraries((GUI,), loader=loader)
    if gui:
        return _needs_message("Tandem cannot start Qt", {GUI: gui}, apt=apt)
    platforms = qt_platforms(env)
    if not set(platforms) <= {XCB, WAYLAND}:
        return None  # offscreen, minimal, vnc, eglfs...: Qt's own message is clear enough
    shown = [p for p in platforms if has_display(p, env)]
    if not shown:
        unset = " and ".join(DISPLAY_VARIABLES[p] for p in platforms)
        verb = "is" if len(platforms) == 1 else "are"
        return f"Tandem cannot open a window: no display ({unset} {verb} not set); {OFFSCREEN_HINT}"
    needs = {p: missing_libraries((p,), loader=loader) for p in shown}
    if any(not missing for missing in needs.values()):
        return None  # Qt falls back to a platform that can work
    return _needs_message("Tandem cannot open a window", needs, apt=apt)


def _needs_message(opening: str, needs: dict[str, list[SystemLibrary]], *, apt: bool) -> str:
    parts = []
    for platform, libraries in needs.items():
        names = _unique(lib.package if apt else lib.soname for lib in libraries)
        parts.append(f"{PLATFORM_TITLES[platform]} needs {', '.join(names)}")
    packages = _unique(lib.package for libraries in needs.values() for lib in libraries)
    if apt:
        sudo = "" if os.geteuid() == 0 else "sudo "
        how = f"install them with: {sudo}apt-get install {' '.join(packages)}"
    else:
        how = "install them with your system's package manager"
    return f"{opening}: {'; '.join(parts)} ({how})"


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--missing-packages",
        action="store_true",
        help="print the Debian/Ubuntu packages whose libraries do not load here, one line",
    )
    args = parser.parse_args(argv)
    if args.missing_packages:
        if not sys.platform.startswith("linux"):
            return 0
        print(" ".join(_unique(lib.package for lib in missing_libraries())))
        return 0
    problem = window_problem()
    print(problem or "Qt can open a window here.")
    return EXIT_NO_WINDOW if problem else 0


if __name__ == "__main__":
    raise SystemExit(main())

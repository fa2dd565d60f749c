"""Before Qt starts, the app names every missing system library (and the packages to install)
or the missing display, and exits with code 2, instead of Qt's abort naming one library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.platform_check import (
    EXIT_NO_WINDOW,
    GUI,
    SYSTEM_LIBRARIES,
    WAYLAND,
    XCB,
    missing_libraries,
    qt_platforms,
    window_problem,
)

ROOT = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")
# Priority "required" on Debian and Ubuntu, or Qt's C/C++ runtime: every system has them.
BASE_LIBRARIES = {
    "libc.so.6",
    "libm.so.6",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "libz.so.1",
    "libzstd.so.1",
}
APP_MODULES = ("QtCore", "QtGui", "QtWidgets")  # the PySide6 modules the app imports
QT_GUI_LIBRARIES = ("Core", "Gui", "Widgets", "DBus", "OpenGL", "Svg")  # and what they load


def missing(*sonames: str):
    """A loader for which `sonames` look missing and everything else loads."""
    return lambda soname: soname not in sonames


def test_missing_xcb_libraries_are_all_named_with_the_apt_command():
    problem = window_problem(
        {"DISPLAY": ":0"},
        system="linux",
        loader=missing("libxcb-cursor.so.0", "libxcb-icccm.so.4"),
        apt=True,
    )
    assert problem.startswith("Tandem cannot open a window: ")
    assert "the X11 (xcb) platform needs libxcb-cursor0, libxcb-icccm4 " in problem
    assert problem.endswith("apt-get install libxcb-cursor0 libxcb-icccm4)")


def test_without_apt_the_shared_libraries_are_named():
    problem = window_problem(
        {"QT_QPA_PLATFORM": "xcb", "DISPLAY": ":0"},
        system="linux",
        loader=missing("libxcb-keysyms.so.1"),
        apt=False,
    )
    assert "the X11 (xcb) platform needs libxcb-keysyms.so.1 " in problem
    assert "package manager" in problem


def test_nothing_missing_means_no_problem():
    assert window_problem({"DISPLAY": ":0"}, system="linux", loader=missing()) is None


def test_no_display_says_how_to_run_offscreen():
    problem = window_problem({}, system="linux", loader=missing())
    assert "no display (DISPLAY is not set)" in problem
    assert "QT_QPA_PLATFORM=offscreen python -m app" in problem


def test_offscreen_and_other_platforms_are_left_to_qt():
    loader = missing("libxcb-cursor.so.0", "libwayland-cursor.so.0")
    for platform in ("offscreen", "minimal", "vnc:size=800x600"):
        env = {"QT_QPA_PLATFORM": platform}
        assert window_problem(env, system="linux", loader=loader) is None
    assert window_problem({}, system="darwin", loader=loader) is None


def test_a_wayland_session_falls_back_to_xcb_like_qt(tmp_path):
    (tmp_path / "wayland-0").touch()
    env = {"XDG_SESSION_TYPE": "wayland", "XDG_RUNTIME_DIR": str(tmp_path), "DISPLAY": ":0"}
    assert qt_platforms(env) == [WAYLAND, XCB]
    wayland_broken = missing("libwayland-cursor.so.0")
    assert window_problem(env, system="linux", loader=wayland_broken) is None
    both_broken = missing("libwayland-cursor.so.0", "libxcb-icccm.so.4")
    problem = window_problem(env, system="linux", loader=both_broken, apt=True)
    assert "the Wayland platform needs libwayland-cursor0; " in problem
    assert "the X11 (xcb) platform needs libxcb-icccm4 " in problem
    assert "apt-get install libwayland-cursor0 libxcb-icccm4)" in problem


def test_qt_platform_lists_and_plugin_arguments_are_understood():
    assert qt_platforms({"QT_QPA_PLATFORM": "wayland;xcb"}) == [WAYLAND, XCB]
    assert qt_platforms({"QT_QPA_PLATFORM": "xcb:nograb"}) == [XCB]
    assert qt_platforms({"WAYLAND_DISPLAY": "wayland-1"}) == [WAYLAND, XCB]
    assert qt_platforms({}) == [XCB]


def test_a_missing_gui_library_is_named_whatever_the_platform():
    problem = window_problem(
        {"QT_QPA_PLATFORM": "offscreen"}, system="linux", loader=missing("libEGL.so.1"), apt=True
    )
    assert problem.startswith("Tandem cannot start Qt: Qt's GUI needs libegl1 ")


def test_packages_are_named_once_even_for_two_libraries():
    problem = window_problem(
        {"QT_QPA_PLATFORM": "offscreen"},
        system="linux",
        loader=missing("libglib-2.0.so.0", "libgthread-2.0.so.0"),
        apt=True,
    )
    assert "Qt's GUI needs libglib2.0-0 (" in problem


def _run_main(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    clean.pop("QT_QPA_PLATFORM", None)
    clean.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(not LINUX, reason="the check is for Linux's xcb and Wayland platforms")
def test_the_app_exits_with_code_2_naming_a_library_that_looks_missing(tmp_path):
    code = (
        "import app.platform_check as check\n"
        "real = check.can_load\n"
        "check.can_load = lambda soname: soname != 'libxcb-cursor.so.0' and real(soname)\n"
        "from app.main import main\n"
        f"raise SystemExit(main(['--data-dir', {str(tmp_path)!r}, '--quit-when-ready']))\n"
    )
    result = _run_main(code, {"QT_QPA_PLATFORM": "xcb", "DISPLAY": ":99"})
    assert result.returncode == EXIT_NO_WINDOW, result.stderr[-2000:]
    assert "Tandem cannot open a window: the X11 (xcb) platform needs " in result.stderr
    assert "libxcb-cursor0" in result.stderr
    assert "qt.qpa" not in result.stderr  # Qt never started
    assert not (tmp_path / "tandem.sqlite3").exists()


@pytest.mark.skipif(not LINUX, reason="the check is for Linux's xcb and Wayland platforms")
def test_the_app_without_any_display_says_how_to_run_offscreen(tmp_path):
    code = f"from app.main import main; raise SystemExit(main(['--data-dir', {str(tmp_path)!r}]))"
    result = _run_main(code, {"XDG_RUNTIME_DIR": str(tmp_path)})
    assert result.returncode == EXIT_NO_WINDOW, result.stderr[-2000:]
    assert "no display (DISPLAY is not set)" in result.stderr
    assert "QT_QPA_PLATFORM=offscreen" in result.stderr


# -- the list against the installed PySide6 --------------------------------------------------


def _qt_dir() -> Path:
    import PySide6

    return Path(PySide6.__file__).parent / "Qt"


def _platform_files(platform: str) -> list[Path]:
    """The files Qt loads for `platform`: the plugin, its plugins, and GUI's own modules."""
    import PySide6

    qt = _qt_dir()
    plugins = qt / "plugins"
    if platform == GUI:
        pyside = Path(PySide6.__file__).parent
        modules = [p for m in APP_MODULES for p in pyside.glob(f"{m}.*.so")]
        return modules + [qt / "lib" / f"libQt6{m}.so.6" for m in QT_GUI_LIBRARIES]
    if platform == XCB:
        return [
            qt / "lib/libQt6XcbQpa.so.6",
            plugins / "platforms/libqxcb.so",
            *plugins.glob("xcbglintegrations/*.so"),
        ]
    return [
        qt / "lib/libQt6WaylandClient.so.6",
        qt / "lib/libQt6WlShellIntegration.so.6",
        plugins / "platforms/libqwayland.so",
        *plugins.glob("wayland-shell-integration/*.so"),
        *plugins.glob("wayland-decoration-client/*.so"),
        *plugins.glob("wayland-graphics-integration-client/*.so"),
    ]


def _needed(path: Path) -> set[str]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, DynamicSection):
                return {tag.needed for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"}
    return set()


@pytest.mark.skipif(not LINUX, reason="Linux's PySide6 wheel")
@pytest.mark.parametrize("platform", [XCB, WAYLAND])
def test_the_list_covers_every_system_library_the_platform_plugins_link(platform):
    """A PySide6 upgrade that links a new system library fails here until the list has it."""
    files = _platform_files(platform)
    assert files and all(f.is_file() for f in files), files
    bundled = {p.name for p in (_qt_dir() / "lib").iterdir()}
    wanted = {GUI, platform}
    listed = {lib.soname for lib in SYSTEM_LIBRARIES if lib.platform in wanted}
    # the platform plugin's own system libraries, and those of the Qt libraries it loads
    system = set().union(*(_needed(f) for f in files + _platform_files(GUI))) - bundled
    system -= {name for name in system if name.startswith(("libpyside6", "libshiboken6"))}
    unlisted = system - listed - BASE_LIBRARIES
    assert not unlisted, f"add these to SYSTEM_LIBRARIES in app/platform_check.py: {unlisted}"


@pytest.mark.skipif(not LINUX, reason="Debian/Ubuntu's libraries")
def test_after_make_setup_every_platform_plugin_resolves_with_ldd():
    """`make setup` installed what the list names: ldd finds every library of the xcb and
    Wayland plugins (and Qt's GUI libraries), and nothing looks missing to the app."""
    assert missing_libraries() == []
    not_found = {}
    for platform in (GUI, XCB, WAYLAND):
        for path in _platform_files(platform):
            out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
            lost = [line.split()[0] for line in out.splitlines() if "not found" in line]
            if lost:
                not_found[path.name] = sorted(set(lost))
    assert not not_found, f"run `make setup`; ldd finds no {not_found}"

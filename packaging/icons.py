"""Tandem's icon in the forms desktops want, drawn from resources/icon.svg by Qt's SVG renderer:
PNGs at the freedesktop hicolor sizes, and a macOS .icns (its container written here: a header
and one PNG per icon type).

    python packaging/icons.py OUT_DIR     # OUT_DIR/hicolor/<n>x<n>/apps/tandem.png, tandem.icns
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SVG = ROOT / "resources" / "icon.svg"
ICON_NAME = "tandem"  # the .desktop file's Icon= and the hicolor file name
HICOLOR_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
# Apple's PNG icon types: 1x and @2x from 16 to 512 points (ICNS type -> pixels)
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),  # 512@2x
    (b"ic11", 32),  # 16@2x
    (b"ic12", 64),  # 32@2x
    (b"ic13", 256),  # 128@2x
    (b"ic14", 512),  # 256@2x
)


def gui_app():
    """The running Qt application, else a new offscreen QGuiApplication (for the scripts)."""
    from PySide6.QtGui import QGuiApplication

    if QGuiApplication.instance() is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        gui_app.created = QGuiApplication(sys.argv[:1])  # lives as long as the process
    return QGuiApplication.instance()


def render_png(svg: Path, size: int) -> bytes:
    """The SVG drawn on a transparent size x size canvas, as PNG bytes (needs gui_app())."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not an SVG Qt can draw")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(0)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data)


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An .icns container holding `pngs` (pixels -> PNG bytes) under every type in ICNS_TYPES."""
    body = b"".join(
        kind + struct.pack(">I", 8 + len(pngs[pixels])) + pngs[pixels]
        for kind, pixels in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def read_icns(data: bytes) -> dict[bytes, bytes]:
    """The entries of an .icns container (type -> payload); raises ValueError if malformed."""
    if data[:4] != b"icns" or struct.unpack(">I", data[4:8])[0] != len(data):
        raise ValueError("not an icns container")
    entries, offset = {}, 8
    while offset < len(data):
        kind, length = (
            data[offset : offset + 4],
            struct.unpack(">I", data[offset + 4 : offset + 8])[0],
        )
        if length < 8 or offset + length > len(data):
            raise ValueError(f"bad length for {kind!r}")
        entries[kind] = data[offset + 8 : offset + length]
        offset += length
    return entries


def hicolor_path(root: Path, size: int) -> Path:
    return root / "hicolor" / f"{size}x{size}" / "apps" / f"{ICON_NAME}.png"


def write_icons(out: Path, *, svg: Path = DEFAULT_SVG, icns: bool = True) -> dict[str, Path]:
    """Write the hicolor PNGs, the scalable SVG and (with `icns`) the .icns under `out`;
    returns what was written."""
    sizes = {*HICOLOR_SIZES, *(pixels for _, pixels in ICNS_TYPES)} if icns else {*HICOLOR_SIZES}
    pngs = {size: render_png(svg, size) for size in sorted(sizes)}
    written: dict[str, Path] = {}
    for size in HICOLOR_SIZES:
        path = hicolor_path(out, size)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pngs[size])
        written[f"{size}x{size}"] = path
    scalable = out / "hicolor" / "scalable" / "apps" / f"{ICON_NAME}.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    scalable.write_bytes(svg.read_bytes())
    written["scalable"] = scalable
    if icns:
        written["icns"] = out / f"{ICON_NAME}.icns"
        written["icns"].write_bytes(icns_bytes(pngs))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write hicolor/ and tandem.icns into")
    parser.add_argument("--svg", type=Path, default=DEFAULT_SVG)
    args = parser.parse_args(argv)
    gui_app()
    for name, path in write_icons(args.out, svg=args.svg).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

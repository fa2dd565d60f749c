"""The icon, drawn from resources/icon.svg: a macOS .icns whose every entry is a PNG of the
size its type promises, and the hicolor PNGs at their sizes."""

from __future__ import annotations

import icons
import pytest
from packaging_support import ROOT


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_the_icns_holds_every_apple_icon_type_at_its_size(qapp, tmp_path):
    written = icons.write_icons(tmp_path)
    entries = icons.read_icns(written["icns"].read_bytes())
    assert [kind for kind, _ in icons.ICNS_TYPES] == list(entries)
    for kind, pixels in icons.ICNS_TYPES:
        assert _png_size(entries[kind]) == (pixels, pixels), kind
    for size in icons.HICOLOR_SIZES:
        assert _png_size(written[f"{size}x{size}"].read_bytes()) == (size, size)
    assert written["scalable"].read_bytes() == (ROOT / "resources" / "icon.svg").read_bytes()


def test_a_damaged_icns_is_refused():
    good = icons.icns_bytes({pixels: b"png" for _, pixels in icons.ICNS_TYPES})
    assert len(icons.read_icns(good)) == len(icons.ICNS_TYPES)
    with pytest.raises(ValueError):
        icons.read_icns(good[:-1])
    with pytest.raises(ValueError):
        icons.read_icns(b"icnx" + good[4:])

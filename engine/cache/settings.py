"""Where the prompt cache keeps its files and how much it may hold: the defaults (each written
once, here) and the engine's settings resolved against them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_DISK_BYTES = 4 << 30
MIN_RAM_BYTES = 256 << 20
RAM_SHARE = 10  # the RAM tier's default: 1/RAM_SHARE of the machine's memory
DIR_ENV = "TANDEM_PROMPT_CACHE_DIR"  # overrides the folder (tests, several profiles)
DIR_NAME = "prompt-cache"  # inside Tandem's user cache folder


def default_ram_bytes() -> int:
    """A tenth of the machine's memory, at least MIN_RAM_BYTES."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = 0
    return max(MIN_RAM_BYTES, total // RAM_SHARE)


DEFAULT_RAM_BYTES = default_ram_bytes()


def default_dir() -> Path:
    """DIR_NAME in Tandem's user cache folder (platformdirs, or $TANDEM_CACHE_DIR)."""
    from engine.default_model import default_cache_root

    return default_cache_root() / DIR_NAME


@dataclass(frozen=True)
class PromptCacheSettings:
    """The prompt cache's limits and folder (None: RAM only)."""

    ram_bytes: int = DEFAULT_RAM_BYTES
    disk_dir: Path | None = None
    disk_bytes: int = DEFAULT_DISK_BYTES

    @classmethod
    def of(cls, config: Any) -> PromptCacheSettings:
        """From an EngineConfig: its prompt_cache_* fields, where None means the default.
        The folder: the configured one, else $TANDEM_PROMPT_CACHE_DIR, else `default_dir()`;
        a disk cap of 0 keeps the cache in RAM only."""
        ram = config.prompt_cache_ram_bytes
        disk = config.prompt_cache_disk_bytes
        disk = DEFAULT_DISK_BYTES if disk is None else int(disk)
        folder = None
        if disk > 0:
            configured = config.prompt_cache_dir or os.environ.get(DIR_ENV)
            folder = Path(configured).expanduser() if configured else default_dir()
        return cls(DEFAULT_RAM_BYTES if ram is None else int(ram), folder, disk)

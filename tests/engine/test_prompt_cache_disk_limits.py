"""The prompt cache's disk limits: a full disk gives one warning and RAM-only mode (whether the
error arrives as an OSError or, as from safetensors' writer, as a SafetensorError; and with a real
ENOSPC where a small tmpfs can be mounted); the byte cap holds under many quick publishes,
counting the writes that are queued or in flight."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import uuid

import pytest
import safetensors.numpy
from mlx_lm import load as mlx_load
from safetensors import SafetensorError

import engine  # noqa: F401  (OpenBLAS before MLX)
import engine.cache.disk_jobs as disk_jobs
from engine.cache import PromptCache
from tests.engine.prompt_cache_support import (
    LOGGER,
    NS,
    assert_continues_like_cold,
    bytes_on_disk,
    files,
    rand_tokens,
)
from tests.tiny_models import make_tiny_llama_dir, prefill

NO_SPACE = "Error while serializing: I/O error: No space left on device (os error 28)"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("llama"))))[0]


def records(caplog, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == level and r.name.startswith(LOGGER)]


def raise_safetensors_error(*_args, **_kwargs):
    raise SafetensorError(NO_SPACE)  # what safetensors' writer raises on ENOSPC


def raise_os_error(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize(
    "fail", [raise_safetensors_error, raise_os_error], ids=["safetensors", "os"]
)
def test_full_disk_gives_one_warning_and_keeps_ram_working(
    llama, tmp_path, caplog, monkeypatch, fail
):
    monkeypatch.setattr(safetensors.numpy, "save_file", fail)
    pc = PromptCache(disk_dir=tmp_path)
    convs = [rand_tokens(10, seed=8 + i) for i in range(3)]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for conv in convs:
            pc.publish(NS, conv, prefill(llama, conv))
            pc.flush()
    warnings = records(caplog, logging.WARNING)
    assert len(warnings) == 1 and "RAM only" in warnings[0].getMessage()
    assert not records(caplog, logging.ERROR)  # no traceback per write
    assert pc.stats().skipped == {"disk-full": 3}  # the failed write and the two not tried
    assert files(tmp_path) == [] and bytes_on_disk(tmp_path) == 0

    match = pc.lookup(NS, convs[1] + [3])
    assert match is not None and match.source == "ram"
    assert_continues_like_cold(llama, match, convs[1] + [3])
    pc.close()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs (needs root and mount; skipped elsewhere)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def test_real_no_space_left_on_device_gives_ram_only_mode(llama, small_tmpfs, caplog):
    pc = PromptCache(disk_dir=small_tmpfs)
    convs = [rand_tokens(40, seed=100 + i) for i in range(12)]  # ~21 KB each: 3 fit
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for conv in convs:
            pc.publish(NS, conv, prefill(llama, conv))
            pc.flush()
    warnings = records(caplog, logging.WARNING)
    assert len(warnings) == 1 and "No space left on device" in warnings[0].getMessage()
    assert not records(caplog, logging.ERROR)
    written = len(files(small_tmpfs))
    assert 1 <= written < len(convs)
    assert pc.stats().skipped["disk-full"] == len(convs) - written
    assert not list(small_tmpfs.rglob("*.tmp"))  # the half-written file was removed
    assert pc.stats().disk_bytes == bytes_on_disk(small_tmpfs)
    for conv in convs:  # every entry is still served (from RAM)
        assert pc.lookup(NS, conv + [5]) is not None
    pc.close()


def test_disk_cap_holds_under_many_quick_publishes(llama, tmp_path, monkeypatch):
    """Writes are queued faster than the writer finishes them. Whenever a file has just been
    written (its temporary name and every other file on disk) and at the end, the folder holds
    at most the cap."""
    root = tmp_path / "cache"
    convs = [rand_tokens(60, seed=200 + i) for i in range(40)]
    probe = PromptCache(disk_dir=tmp_path / "probe")
    probe.publish(NS, convs[0], prefill(llama, convs[0]))
    probe.flush()
    one = bytes_on_disk(tmp_path / "probe")
    probe.close()
    cap = int(3.5 * one)

    peaks = []
    write_file = disk_jobs.write_file

    def measured(path, tensors, metadata):
        write_file(path, tensors, metadata)
        peaks.append(bytes_on_disk(root))  # the moment the most is on disk

    monkeypatch.setattr(disk_jobs, "write_file", measured)
    pc = PromptCache(disk_dir=root, disk_bytes=cap, ram_bytes=1)  # disk only: no RAM hits
    for conv in convs:
        pc.publish(NS, conv, prefill(llama, conv))
        pc.tick(idle=True)  # evaluated and queued, not waited for
    pc.flush()
    s = pc.stats()
    assert len(peaks) >= 10 and max(peaks) <= cap
    assert bytes_on_disk(root) <= cap and s.disk_bytes == bytes_on_disk(root)
    assert s.disk_entries == len(files(root)) >= 3
    assert s.skipped.get("disk-busy", 0) + len(peaks) >= len(convs) - 1
    assert pc.lookup(NS, convs[-1] + [1]) is not None  # the newest entry was kept
    pc.close()

"""Compiled CUDA kernels no current build loads are removed from Tandem's kernel folder once
unused for a while: old digests of Tandem's kernels and folders of other MLX versions."""

import os
import time

from engine.kernels.stale_kernels import (
    DEFAULT_UNUSED_DAYS,
    USED_STAMP,
    current_kernel_names,
    is_stale_kernel,
    mark_used,
    prune_stale_kernels,
)

DAY = 86400.0
OLD = time.time() - (DEFAULT_UNUSED_DAYS + 5) * DAY


def _write(path, *, mtime=None, size=100):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _compiled(folder, name, *, mtime=None):
    """The two files MLX writes for a custom kernel: its PTX and its kernel names."""
    stem = f"custom_kernel_{name}_bfloat16_128_8_4_9f3a61c2"
    return [_write(folder / f"{stem}{ext}", mtime=mtime) for ext in (".ptx", ".txt")]


def _age(tree, mtime):
    for path in [tree, *tree.rglob("*")]:
        os.utime(path, (mtime, mtime))


def test_the_current_names_are_every_variant_and_tandems_own():
    names = current_kernel_names()
    assert len(names) == 8  # verify attention 2, gated delta 4, skinny matmul, depthwise conv
    assert all(name.startswith("tandem_") for name in names)


def test_a_file_is_stale_only_for_a_tandem_kernel_under_no_current_name():
    current = ["tandem_verify_attention_0123456789ab"]
    assert not is_stale_kernel(
        "custom_kernel_tandem_verify_attention_0123456789ab_f_1.ptx", current
    )
    assert is_stale_kernel("custom_kernel_tandem_verify_attention_ba9876543210_f_1.ptx", current)
    assert is_stale_kernel("custom_kernel_tandem_verify_attention_grouped_0123_1.txt", current)
    assert not is_stale_kernel("custom_kernel_someone_elses_kernel_1.ptx", current)
    assert not is_stale_kernel("binary_ops_Add_float32.ptx", current)


def test_old_kernels_and_old_mlx_folders_go_the_rest_stays(tmp_path):
    root = tmp_path / "cuda-kernels"
    folder = root / "mlx-0.32.4" / "sm_90"
    current = sorted(current_kernel_names())[0]
    kept = _compiled(folder, current, mtime=OLD)  # in use, however old
    gone = _compiled(folder, "tandem_verify_attention_0000deadbeef", mtime=OLD)
    recent = _compiled(folder, "tandem_verify_attention_1111deadbeef")  # another install's
    mlx_own = _write(folder / "binary_ops_Add_float32.ptx", mtime=OLD)
    other_gpu = _write(root / "mlx-0.32.4" / "sm_80" / "a.ptx", mtime=OLD)
    old_version = _write(root / "mlx-0.31.0" / "sm_90" / "a.ptx", size=5000).parent.parent
    _age(old_version, OLD)
    used_version = _write(root / "mlx-0.31.1" / "sm_90" / "a.ptx").parent
    _age(used_version.parent, OLD)
    mark_used(used_version)  # a checkout beside the app still runs this version
    pruned = prune_stale_kernels(folder)
    assert (pruned.files, pruned.folders) == (2, 1)
    assert pruned.bytes == 2 * 100 + 5000
    assert not any(path.exists() for path in gone) and not old_version.exists()
    assert all(path.exists() for path in [*kept, *recent, mlx_own, other_gpu])
    assert (used_version / "a.ptx").exists() and (used_version / USED_STAMP).exists()
    assert prune_stale_kernels(folder).files == 0  # nothing left to remove


def test_a_folder_that_cannot_be_read_is_left_alone(tmp_path):
    pruned = prune_stale_kernels(tmp_path / "missing" / "sm_90")
    assert (pruned.files, pruned.folders, pruned.bytes) == (0, 0, 0)
    mark_used(tmp_path / "missing")  # no folder to stamp: nothing raised

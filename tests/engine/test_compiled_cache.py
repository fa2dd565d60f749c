"""MLX's compiled CUDA kernels go to Tandem's cache folder, per MLX version and GPU architecture."""

from __future__ import annotations

import pytest

from engine.kernels import compiled_cache
from engine.kernels.compiled_cache import (
    PTX_CACHE_ENV,
    compiled_kernel_folder,
    keep_compiled_kernels,
)
from engine.kernels.stale_kernels import USED_STAMP


@pytest.fixture
def on_cuda(monkeypatch):
    monkeypatch.setenv(PTX_CACHE_ENV, "")  # recorded, so what a test sets is undone after it
    monkeypatch.delenv(PTX_CACHE_ENV)
    monkeypatch.setattr(compiled_cache, "cuda_available", lambda: True)
    monkeypatch.setattr(
        compiled_cache.mx,
        "device_info",
        lambda: {"architecture": "sm_90", "device_name": "NVIDIA H200"},
    )


def test_the_folder_names_the_mlx_version_and_a_safe_architecture(tmp_path):
    folder = compiled_kernel_folder(tmp_path, mlx_version="0.32.4", architecture="sm 90/a")
    assert folder == tmp_path / "cuda-kernels" / "mlx-0.32.4" / "sm_90_a"
    assert compiled_kernel_folder(tmp_path, mlx_version="1", architecture="//").name == "gpu"


def test_on_cuda_mlx_is_pointed_at_the_cache_folder(tmp_path, on_cuda, monkeypatch):
    folder = keep_compiled_kernels(tmp_path)
    assert folder is not None and folder.is_dir()
    assert folder.parent.name == f"mlx-{compiled_cache.mx.__version__}"
    assert folder.name == "sm_90"
    assert compiled_cache.os.environ[PTX_CACHE_ENV] == str(folder)


def test_a_folder_the_user_chose_is_kept(tmp_path, on_cuda, monkeypatch):
    monkeypatch.setenv(PTX_CACHE_ENV, "/somewhere/else")
    assert keep_compiled_kernels(tmp_path) is None
    assert compiled_cache.os.environ[PTX_CACHE_ENV] == "/somewhere/else"


def test_without_cuda_nothing_changes(tmp_path, monkeypatch):
    monkeypatch.setenv(PTX_CACHE_ENV, "")
    monkeypatch.delenv(PTX_CACHE_ENV)
    monkeypatch.setattr(compiled_cache, "cuda_available", lambda: False)
    assert keep_compiled_kernels(tmp_path) is None
    assert PTX_CACHE_ENV not in compiled_cache.os.environ
    assert not (tmp_path / "cuda-kernels").exists()


def test_a_folder_that_cannot_be_made_leaves_mlx_its_own(tmp_path, on_cuda):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert keep_compiled_kernels(blocker) is None
    assert PTX_CACHE_ENV not in compiled_cache.os.environ


def test_a_gpu_mlx_cannot_name_gets_no_folder(tmp_path, on_cuda, monkeypatch):
    monkeypatch.setattr(compiled_cache.mx, "device_info", lambda: {})
    assert keep_compiled_kernels(tmp_path) is None
    assert PTX_CACHE_ENV not in compiled_cache.os.environ

    def broken() -> dict:
        raise RuntimeError("no device")

    monkeypatch.setattr(compiled_cache.mx, "device_info", broken)
    assert keep_compiled_kernels(tmp_path) is None


def test_the_chosen_folder_is_stamped_as_used(tmp_path, on_cuda):
    folder = keep_compiled_kernels(tmp_path)
    assert (folder / USED_STAMP).is_file()

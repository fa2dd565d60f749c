"""What the PyInstaller spec adds to the bundle beyond import analysis, checked against the
installed packages: every module mlx-lm imports by name, and the pins the build backend and
the engine share."""

from __future__ import annotations

from pathlib import Path

import mlx_lm
import pytest
import tandem_build_backend as backend

from engine import default_model

pytest.importorskip("PyInstaller", reason="needs the package extra (make package installs it)")
import bundle_contents  # noqa: E402


def _modules_on_disk(package: str) -> set[str]:
    """Every module file of an installed mlx-lm subpackage, by its dotted name."""
    folder = Path(mlx_lm.__file__).parent / package.split(".", 1)[1].replace(".", "/")
    return {
        f"{package}.{path.stem}" if path.stem != "__init__" else package
        for path in folder.glob("*.py")
    }


@pytest.fixture(scope="module")
def hidden() -> set[str]:
    return set(bundle_contents.hidden_imports())


@pytest.mark.parametrize(
    "package", ["mlx_lm.models", "mlx_lm.chat_templates", "mlx_lm.tool_parsers"]
)
def test_the_spec_hides_every_module_mlx_lm_imports_by_name(hidden, package):
    on_disk = _modules_on_disk(package)
    assert len(on_disk) > (50 if package == "mlx_lm.models" else 1)
    assert on_disk <= hidden, sorted(on_disk - hidden)


def test_the_spec_hides_tokenizer_modules_and_the_baked_version(hidden):
    assert "transformers.models.llama.tokenization_llama" in hidden
    assert "transformers.models.auto.tokenization_auto" in hidden
    assert not any(".modeling_" in name for name in hidden)  # torch, which Tandem never runs
    assert bundle_contents.VERSION_MODULE in hidden and "mlx._reprlib_fix" in hidden


def test_the_build_backend_and_the_engine_agree_on_the_default_model():
    assert backend.MODEL_REQUIREMENT == default_model.DEFAULT_MODEL_PIP
    assert backend.GGUF_NAME == default_model.DEFAULT_GGUF_NAME
    assert backend.PACKAGE_DATA_DIR == "/".join(default_model.BUNDLED_GGUF_DIR)
    assert backend.sha256(default_model.default_gguf_path()) == backend.GGUF_SHA256


def test_the_macos_app_asks_for_the_macos_mlx_needs():
    plist = bundle_contents.info_plist("1.2.3")
    assert plist["LSMinimumSystemVersion"] == "14.0" and plist["NSHighResolutionCapable"] is True
    assert plist["CFBundleShortVersionString"] == "1.2.3"


def test_a_build_machines_cuda_runtime_never_ships_nor_its_links():
    binaries = [
        ("libcudart.so.13", "/usr/local/cuda/lib/libcudart.so.13", "BINARY"),
        ("libopenblas.so.0", "/usr/lib/libopenblas.so.0", "BINARY"),
    ]
    datas = [
        ("libcudart.so", "libcudart.so.13", "SYMLINK"),  # PyInstaller 6 puts links in datas
        ("resources/drafts/smollm2-135m-eagle.json", "/r/smollm2-135m-eagle.json", "DATA"),
    ]
    assert [e[0] for e in bundle_contents.wanted(binaries)] == ["libopenblas.so.0"]
    assert [e[0] for e in bundle_contents.wanted(datas)] == [
        "resources/drafts/smollm2-135m-eagle.json"
    ]

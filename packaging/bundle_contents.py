"""What the PyInstaller bundle must carry beyond what import analysis finds: modules imported by
name at run time, native libraries and data files, and the version baked in. packaging/tandem.spec
uses it; tests/packaging/ checks it against the installed packages and the built bundle."""

from __future__ import annotations

import sys
from pathlib import Path

from PyInstaller.utils.hooks import (
    collect_data_files,
    collect_dynamic_libs,
    collect_submodules,
    copy_metadata,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # the `package` extra installs it there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
APP_NAME = "tandem"  # the Linux program and folder: dist/tandem/tandem
MAC_APP_NAME = "Tandem.app"
BUNDLE_IDENTIFIER = "org.tandem.Tandem"
MLX_MIN_MACOS = "14.0"  # mlx 0.32.4's macOS wheels are tagged macosx_14_0_arm64 at the lowest
VERSION_MODULE = "tandem_bundle_version"  # app/version.py reads it when frozen
# mlx's extension imports its Python helpers (mlx._reprlib_fix) from C; mlx-lm imports these by
# name (a model's model_type, a tokenizer's chat template or tool parser); keyring finds the
# system's keyring backend by entry point (its metadata is copied too)
DYNAMIC_PACKAGES = (
    "mlx",
    "mlx_lm.models",
    "mlx_lm.chat_templates",
    "mlx_lm.tool_parsers",
    "keyring.backends",
)
# transformers' AutoTokenizer/AutoConfig import a model family's modules by name; only these two
# kinds are needed for tokenizers (the modeling_* files want torch)
TRANSFORMERS_KINDS = ("tokenization_", "configuration_")
# installed in a developer's .venv (tests, benchmarks: matplotlib brings Pillow, which
# transformers' image code would pull in; nvidia: NVRTC for engine.bench.nvrtc_check), never
# used by the app
EXCLUDES = ["tkinter", "matplotlib", "PIL", "pytest", "_pytest", "IPython", "torch", "pyelftools",
            "openai", "nvidia"]  # fmt: skip
# found by scanning ctypes.CDLL calls, but only probed at run time: transformers asks for the CUDA
# runtime, the test extras install NVRTC (and a build machine's copy must never ship)
UNWANTED_BINARIES = ("libcudart", "libnvrtc")
RESOURCE_SUFFIXES = (".json", ".qss", ".svg", ".png", ".safetensors")  # + draft heads


def project_version(root: Path = ROOT) -> str:
    """`version` from pyproject.toml: the one number."""
    with (root / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["project"]["version"]


def write_version_module(folder: Path, root: Path = ROOT) -> Path:
    """Write tandem_bundle_version.py (VERSION = pyproject's version) into `folder`; returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    text = f'"""Written by packaging/tandem.spec."""\n\nVERSION = {project_version(root)!r}\n'
    (folder / f"{VERSION_MODULE}.py").write_text(text, encoding="utf-8")
    return folder


def _transformers_module(name: str) -> bool:
    parts = name.split(".")
    return len(parts) <= 3 or parts[3].startswith(TRANSFORMERS_KINDS)


def hidden_imports() -> list[str]:
    """Modules imported by name at run time, which PyInstaller's analysis cannot see."""
    names = [VERSION_MODULE]
    for package in DYNAMIC_PACKAGES:
        names += collect_submodules(package)
    names += collect_submodules("transformers.models", filter=_transformers_module)
    names += collect_submodules("huggingface_hub", filter=lambda name: ".cli" not in name)
    return sorted(set(names))


def datas(model_files: list[Path]) -> list[tuple[str, str]]:
    """Data files: Tandem's resources, the default model (GGUF and licence), MLX's Metal
    kernels, and the metadata that About and transformers read."""
    found = [
        (str(path), str(path.parent.relative_to(ROOT)))
        for path in sorted((ROOT / "resources").rglob("*"))
        if path.suffix in RESOURCE_SUFFIXES
    ]
    found += [(str(path), "resources/models") for path in model_files]
    found += collect_data_files("mlx", includes=["**/*.metallib"])  # macOS: beside libmlx.dylib
    for distribution in (
        "mlx",
        "mlx-lm",
        "tokenizers",
        "safetensors",
        "huggingface-hub",
        "keyring",
    ):
        found += copy_metadata(distribution)
    return found


def binaries() -> list[tuple[str, str]]:
    """Native libraries loaded by path rather than linked: libmlx (and its libs), OpenBLAS."""
    from engine.blas import BUNDLED_OPENBLAS, DEFAULT_OPENBLAS_PATHS

    found = collect_dynamic_libs("mlx")
    if sys.platform.startswith("linux"):
        openblas = [path for path in DEFAULT_OPENBLAS_PATHS if Path(path).exists()]
        if not openblas:
            raise SystemExit(
                "OpenBLAS is missing: install libopenblas0-pthread (make setup does on Debian); "
                "without it the bundle would run MLX on the slow reference BLAS"
            )
        assert Path(openblas[0]).name == BUNDLED_OPENBLAS  # engine/blas.py loads it by that name
        found.append((openblas[0], "."))
    return found


def wanted(toc: list[tuple]) -> list[tuple]:
    """An analysis TOC less UNWANTED_BINARIES: the libraries in its binaries, and in its datas
    the symbolic links PyInstaller 6 makes to them (libcudart.so -> libcudart.so.13), which
    would otherwise ship dangling."""
    return [entry for entry in toc if not Path(entry[0]).name.startswith(UNWANTED_BINARIES)]


def info_plist(version: str) -> dict[str, object]:
    """The macOS app's Info.plist entries (PyInstaller writes the rest)."""
    return {
        "CFBundleName": "Tandem",
        "CFBundleDisplayName": "Tandem",
        "CFBundleShortVersionString": version,
        "CFBundleVersion": version,
        "NSHighResolutionCapable": True,
        "LSMinimumSystemVersion": MLX_MIN_MACOS,
        "LSArchitecturePriority": ["arm64"],
        "LSApplicationCategoryType": "public.app-category.productivity",
        "NSPrincipalClass": "NSApplication",
    }

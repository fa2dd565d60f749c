"""One small config per architecture in mlx-lm's `models/`, or why it cannot be built small.

Each entry's `config` holds only what differs from `build.SHARED` (hidden 64, 2 layers of 4
heads, 4 experts, sliding windows of 8, the tiny tokenizer's vocabulary of 1024); layer patterns
are cut to one layer of each kind, or 4 layers where a pattern needs them. A wrapper model's
`text_config` names its text model's argument class under "args". `unbuildable` says why an
architecture has no row in the matrix, `unquantizable` why it has no 4-bit copy.

The entries are split by what their layers keep: catalog_attention.py (keys and values only),
catalog_stateful.py (a running state too); the few that cannot be built small are here.
"""

from __future__ import annotations

from tests.architectures.arch import Arch
from tests.architectures.catalog_attention import ATTENTION
from tests.architectures.catalog_stateful import STATEFUL

# modules of mlx_lm.models that are not architectures (shared layers, caches, helpers)
HELPER_MODULES = frozenset(
    {
        "activations",
        "base",
        "bitlinear_layers",
        "cache",
        "gated_delta",
        "mla",
        "pipeline",
        "rope_utils",
        "ssm",
        "switch_layers",
    }
)

UNBUILDABLE: list[Arch] = [
    Arch("bitnet", unbuildable="its BitLinear layers run a Metal kernel: Apple silicon only"),
    Arch("muse_spark", unbuildable="its layers call Metal kernels (mlx_lm.kernels): Apple only"),
    Arch("olmo", unbuildable="mlx-lm's module needs the ai2-olmo package, which is not installed"),
    Arch(
        "phi3small",
        unbuildable="mlx-lm's phi3small crashes this process (segmentation fault, in most runs) "
        "in its first decode step after a prompt on the Linux CPU backend (mlx 0.32.4), "
        "in mlx_lm.generate alone",
    ),
    Arch(
        "prism_hadamard_qwen35",
        unbuildable="needs the Hadamard rotation pack its converter writes next to the weights",
    ),
]

CATALOG: list[Arch] = sorted(ATTENTION + STATEFUL + UNBUILDABLE, key=lambda a: a.name)
BY_NAME = {a.name: a for a in CATALOG}

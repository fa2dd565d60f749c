"""Session 26: the verify-attention kernel with a block per group of query heads (one key read
for the group) against the kernel as it was (a block per query head) and MLX, per call.
Checks the new kernel's output equals the old one's bit for bit, and its error against a
float32 reference. Usage: python grouped_check.py OLD_MODULE.py OUT.json"""

import importlib.util
import itertools
import json
import sys

import mlx.core as mx

from engine.bench.attention_check import per_call_ms, reference, verify_mask
from engine.kernels import verify_attention_cuda as vac

HEADS = ((32, 8, 128), (32, 8, 64), (32, 4, 128), (64, 8, 64), (16, 16, 128))
BATCHES, QUERIES, KEYS = (1, 4, 16, 32), (1, 5), (256, 1024, 4096)
REPEATS = 15


def load_old(path: str):
    spec = importlib.util.spec_from_file_location("old_vac", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # its own name: MLX keeps compiled kernels by name and template
    mod._kernel = mx.fast.cuda_kernel(
        name="tandem_verify_attention_old",
        input_names=["q", "k", "v", "mask", "scale"],
        output_names=["out"],
        source=mod._SOURCE,
    )
    return mod


def main(old_path: str, out: str) -> None:
    old = load_old(old_path)
    vac.uninstall()
    rows = []
    for (hq, hk, d), b, n, L in itertools.product(HEADS, BATCHES, QUERIES, KEYS):
        q = mx.random.normal((b, hq, n, d), key=mx.random.key(1)).astype(mx.bfloat16)
        k = mx.random.normal((b, hk, L, d), key=mx.random.key(2)).astype(mx.bfloat16)
        v = mx.random.normal((b, hk, L, d), key=mx.random.key(3)).astype(mx.bfloat16)
        mask = verify_mask(b, n, L)
        scale = d**-0.5
        want = reference(q, k, v, scale, mask)
        before = old.verify_attention(q, k, v, scale=scale, mask=mask)
        row = {"heads": [hq, hk, d], "batch": b, "queries": n, "keys": L}
        row["old_ms"] = per_call_ms(
            lambda: old.verify_attention(q, k, v, scale=scale, mask=mask), REPEATS
        )
        row["mlx_ms"] = per_call_ms(
            lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask), REPEATS
        )
        row["old_error"] = mx.abs(before.astype(mx.float32) - want).max().item()
        for most in (1, 2, 4, 8):
            vac.MAX_HEADS_PER_BLOCK = most
            heads = vac.heads_per_block(hq // hk, d)
            if f"h{heads}_ms" in row:
                continue
            got = vac.verify_attention(q, k, v, scale=scale, mask=mask)
            row[f"h{heads}_equal_old"] = bool(mx.array_equal(got, before).item())
            row[f"h{heads}_diff_old"] = (
                mx.abs(got.astype(mx.float32) - before.astype(mx.float32)).max().item()
            )
            row[f"h{heads}_ms"] = per_call_ms(
                lambda: vac.verify_attention(q, k, v, scale=scale, mask=mask), REPEATS
            )
        vac.MAX_HEADS_PER_BLOCK = 8
        rows.append(row)
        print(row, flush=True)
    json.dump(rows, open(out, "w"), indent=1)


main(sys.argv[1], sys.argv[2])

"""Session 24 probe: sibling projections (q/k/v, gate/up) as one matmul, against mlx-lm's
separate ones. Bare loops over mlx-lm's plain KVCache (engine.bench.ladder_rungs), alternated
in one process; and how far the fused logits are from the separate ones.
Usage: python fuse_probe.py random:8b OUT.json [batch ...]"""

import json
import sys
import time

import mlx.core as mx
import mlx.nn as nn

from engine.bench.ladder_rungs import bare_forward, bare_verify, prompts_for
from engine.bench.random_model import load_random


class _Shared:
    def __init__(self, linears):
        self.w = mx.concatenate([m.weight for m in linears], axis=0)
        self.edges = []
        lo = 0
        for m in linears:
            self.edges.append((lo, lo + m.weight.shape[0]))
            lo += m.weight.shape[0]
        self.x = None
        self.y = None


class _Part(nn.Module):
    def __init__(self, shared, index):
        super().__init__()
        self._shared = [shared]
        self._index = index

    def __call__(self, x):
        s = self._shared[0]
        if s.x is not x:
            s.x, s.y = x, x @ s.w.T
        lo, hi = s.edges[self._index]
        return s.y[..., lo:hi]


def fuse(model, on: bool):
    for layer in model.layers:
        a, m = layer.self_attn, layer.mlp
        if on:
            layer._orig = (a.q_proj, a.k_proj, a.v_proj, m.gate_proj, m.up_proj)
            s1 = _Shared([a.q_proj, a.k_proj, a.v_proj])
            s2 = _Shared([m.gate_proj, m.up_proj])
            a.q_proj, a.k_proj, a.v_proj = (_Part(s1, i) for i in range(3))
            m.gate_proj, m.up_proj = (_Part(s2, i) for i in range(2))
        else:
            a.q_proj, a.k_proj, a.v_proj, m.gate_proj, m.up_proj = layer._orig


def main():
    spec, out = sys.argv[1], sys.argv[2]
    model = load_random(spec).model
    inner = model.model if hasattr(model, "model") else model
    fused_ready = False
    res = {"spec": spec, "runs": []}
    # closeness of the logits
    x = mx.array(prompts_for(4, 64))
    base = model(x).astype(mx.float32)
    mx.eval(base)
    fuse(inner, True)
    fused = model(x).astype(mx.float32)
    mx.eval(fused)
    fuse(inner, False)
    res["max_abs_diff"] = mx.abs(base - fused).max().item()
    res["scale"] = mx.abs(base).max().item()
    res["argmax_equal"] = mx.mean(mx.argmax(base, -1) == mx.argmax(fused, -1)).item()
    res["bit_equal"] = bool(mx.array_equal(base, fused).item())
    print("closeness", {k: res[k] for k in ("max_abs_diff", "scale", "argmax_equal", "bit_equal")}, flush=True)
    cases = [("forward", 1), ("forward", 4), ("forward", 16), ("verify", 1), ("verify", 4), ("verify", 16)]
    if sys.argv[3:]:  # forward only, at these batch sizes
        cases = [("forward", int(b)) for b in sys.argv[3:]]
    for rep in range(3):
        for kind, b in cases:
            prompts = prompts_for(b, 256, seed=rep)
            for on in ((False, True) if rep % 2 == 0 else (True, False)):
                fuse(inner, on)
                t = time.perf_counter()
                r = bare_forward(model, prompts, 48) if kind == "forward" else bare_verify(model, prompts, 24)
                fuse(inner, False) if on else None
                row = {"rep": rep, "kind": kind, "batch": b, "fused": on, "ms": r["ms"]}
                res["runs"].append(row)
                print(row, f"{time.perf_counter()-t:.1f}s", flush=True)
                mx.clear_cache()
    summary = {}
    for kind, b in cases:
        for on in (False, True):
            v = sorted(r["ms"] for r in res["runs"] if r["kind"] == kind and r["batch"] == b and r["fused"] == on)
            summary[f"{kind}{b}_{'fused' if on else 'base'}"] = v[len(v) // 2]
    res["median_ms"] = summary
    for kind, b in cases:
        s, f = summary[f"{kind}{b}_base"], summary[f"{kind}{b}_fused"]
        print(f"{kind} batch {b}: base {s:.2f} ms, fused {f:.2f} ms, fused/base {f/s:.3f}")
    json.dump(res, open(out, "w"), indent=1)


main()

"""Skinny matmul: cuBLAS (MLX) against the kernel, per shape, and a model's forward by width."""
import statistics, sys, time
import mlx.core as mx
from engine.kernels import skinny_matmul_cuda as S

def per_call(fn, ws, reps=15):
    mx.eval([fn(w) for w in ws]); mx.synchronize()
    out = []
    for _ in range(reps):
        t = time.perf_counter(); mx.eval([fn(w) for w in ws]); out.append((time.perf_counter() - t) / len(ws))
    return 1e3 * statistics.median(out)

dt = mx.bfloat16
for K, N in ((2048, 2048), (2048, 8192), (8192, 2048), (4096, 4096), (4096, 14336), (14336, 4096), (2048, 49152)):
    ws = [mx.random.normal((N, K)).astype(dt) * 0.02 for _ in range(6)]
    mx.eval(ws)
    gb = N * K * 2 / 1e9
    line = f"K={K:5d} N={N:5d} ({gb*1e3:.0f} MB):"
    for M in (1, 2, 5, 8, 16, 20, 32):
        x = mx.random.normal((M, K)).astype(dt); mx.eval(x)
        t_mlx = per_call(lambda w: x @ w.T, ws)
        s = f" M={M} mlx {t_mlx:.3f}"
        if M >= 2:
            t_k = per_call(lambda w: S.skinny_matmul(x, w), ws)
            ref = (x.astype(mx.float32) @ ws[0].T.astype(mx.float32))
            err_k = mx.abs(S.skinny_matmul(x, ws[0]).astype(mx.float32) - ref).max().item()
            err_m = mx.abs((x @ ws[0].T).astype(mx.float32) - ref).max().item()
            s += f" kern {t_k:.3f} (err {err_k:.1e} vs {err_m:.1e})"
        line += s + " |"
    print(line, flush=True)
    del ws

from mlx_lm.models.cache import make_prompt_cache
from engine.models import load_model
for spec in sys.argv[1:]:
    model = load_model(spec).model
    for batch in (1, 4):
        for width in (1, 2, 5, 9):
            res = {}
            for on in (False, True):
                S.install() if on else S.uninstall()
                cache = make_prompt_cache(model)
                model(mx.ones((batch, 256), dtype=mx.uint32) * 7, cache=cache); mx.eval([c.state for c in cache])
                x = mx.ones((batch, width), dtype=mx.uint32) * 11
                times, logits = [], None
                for i in range(12):
                    t = time.perf_counter(); out = model(x, cache=cache); mx.eval(out); times.append(time.perf_counter() - t)
                    for c in cache: c.trim(width)
                    logits = out
                res[on] = (1e3 * statistics.median(times[2:]), logits)
            diff = mx.abs(res[True][1].astype(mx.float32) - res[False][1].astype(mx.float32)).max().item()
            same = (mx.argmax(res[True][1], -1) == mx.argmax(res[False][1], -1)).all().item()
            print(f"{spec} batch {batch} width {width}: mlx {res[False][0]:.2f} ms  kernel {res[True][0]:.2f} ms  max|dlogit| {diff:.2e} argmax same {same}", flush=True)
    S.uninstall()

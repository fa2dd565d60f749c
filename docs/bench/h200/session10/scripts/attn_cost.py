"""Host and device cost of attention variants on this backend (per call, 16 layers' worth)."""
import time, statistics, sys
import mlx.core as mx

def bench(name, make, reps=60):
    outs = [make() for _ in range(3)]; mx.eval(outs)
    mx.synchronize()
    host = []
    t0 = time.perf_counter()
    for _ in range(reps):
        a = time.perf_counter(); o = make(); mx.async_eval(o); host.append(time.perf_counter() - a)
    mx.synchronize(); total = (time.perf_counter() - t0) / reps
    sync = []
    for _ in range(20):
        a = time.perf_counter(); mx.eval(make()); sync.append(time.perf_counter() - a)
    print(f"{name:48s} host {1e3*statistics.median(host):7.3f} ms  pipelined {1e3*total:7.3f} ms  sync {1e3*statistics.median(sync):7.3f} ms", flush=True)

dt = mx.bfloat16
for B in (1, 16):
    for L in (512, 2048):
        Hq, Hk, D = 32, 8, 64
        k = mx.random.normal((B, Hk, L, D)).astype(dt); v = mx.random.normal((B, Hk, L, D)).astype(dt)
        for N in (1, 5):
            q = mx.random.normal((B, Hq, N, D)).astype(dt)
            scale = D ** -0.5
            boolmask = (mx.arange(L)[None, None, None, :] < (L - 40 + mx.arange(N)[None, None, :, None])) & (mx.arange(L)[None,None,None,:] >= mx.arange(B)[:, None, None, None])
            mx.eval(q, boolmask)
            tag = f"B={B:2d} L={L} N={N}"
            bench(f"{tag} sdpa nomask", lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale))
            bench(f"{tag} sdpa boolmask", lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=boolmask))
            if N > 1:
                bench(f"{tag} sdpa causal", lambda: mx.fast.scaled_dot_product_attention(q, k[..., :L, :], v, scale=scale, mask="causal"))
            def unfused():
                qq = q.reshape(B, Hk, Hq // Hk, N, D) * scale
                s = qq @ k[:, :, None].swapaxes(-1, -2)
                s = mx.where(boolmask[:, :, None], s, -1e9)
                p = mx.softmax(s.astype(mx.float32), axis=-1).astype(dt)
                return (p @ v[:, :, None]).reshape(B, Hq, N, D)
            bench(f"{tag} unfused", unfused)

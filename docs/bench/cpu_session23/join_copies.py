"""What a 1,024-position row joining three rows costs in copies: merge, extend, and the first write after it (30 layers of the default model's KV shape)."""
import engine, time, sys
import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, KVCache
from engine.cache.batch_rows import merge_row_caches
from engine.cache.kv_quant import extend_layer
H,D,layers=3,64,30
def kv(n):
    c=KVCache(); c.update_and_fetch(mx.random.normal((1,H,n,D)), mx.random.normal((1,H,n,D))); return c
def T(f):
    t=time.perf_counter(); r=f(); return r,(time.perf_counter()-t)*1e3
for rep in range(3):
    batch = merge_row_caches([[kv(300+37*i) for _ in range(layers)] for i in range(3)])
    for l in batch: l.update_and_fetch(mx.random.normal((3,H,1,D)), mx.random.normal((3,H,1,D)))
    row=[kv(1024) for _ in range(layers)]
    mx.eval([l.state for l in batch],[l.state for l in row])
    m,t1=T(lambda: (lambda m: (mx.eval([l.state for l in m]), m)[1])(merge_row_caches([row])))
    _,t2=T(lambda: (lambda r: mx.eval([l.state for l in r]))([extend_layer(a,b) for a,b in zip(batch,m)]))
    for l in batch: l.update_and_fetch(mx.random.normal((4,H,1,D)), mx.random.normal((4,H,1,D)))
    _,t3=T(lambda: mx.eval([l.state for l in batch]))
    print("merge %.1f extend %.1f first update %.1f"%(t1,t2,t3))

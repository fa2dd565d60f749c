"""The join as one allocation with room for the next step, against merge + extend + the first write's growth."""
import engine, time, sys
import mlx.core as mx
from mlx_lm.models.cache import KVCache
from engine.cache.batch_rows import merge_row_caches
from engine.cache.kv_quant import extend_layer
from engine.cache import mlx_lm_private as private
H,D,layers=3,64,30
def one_copy(self, other):
    self.compact(); other.compact()
    a, b = private.write_index(self), private.write_index(other)
    idx = max(a, b)
    cap = (idx + self.step) // self.step * self.step
    B1, B2 = self.keys.shape[0], other.keys.shape[0]
    Hh, Dk, Dv = self.keys.shape[1], self.keys.shape[3], self.values.shape[3]
    keys = mx.zeros((B1 + B2, Hh, cap, Dk), self.keys.dtype)
    values = mx.zeros((B1 + B2, Hh, cap, Dv), self.values.dtype)
    keys[:B1, :, idx - a : idx] = self.keys[..., :a, :]
    keys[B1:, :, idx - b : idx] = other.keys[..., :b, :]
    values[:B1, :, idx - a : idx] = self.values[..., :a, :]
    values[B1:, :, idx - b : idx] = other.values[..., :b, :]
    self.left_padding = mx.concatenate([self.left_padding + (idx - a), other.left_padding + (idx - b)])
    self.offset = mx.concatenate([self.offset, other.offset])
    self.keys, self.values = keys, values
    private.set_write_index(self, idx)
def kv(n):
    c=KVCache(); c.update_and_fetch(mx.random.normal((1,H,n,D)), mx.random.normal((1,H,n,D))); return c
def T(f):
    t=time.perf_counter(); r=f(); return r,(time.perf_counter()-t)*1e3
res={}
for rep in range(4):
  for way in ("now","one"):
    batch = merge_row_caches([[kv(300+37*i) for _ in range(layers)] for i in range(3)])
    for l in batch: l.update_and_fetch(mx.random.normal((3,H,1,D)), mx.random.normal((3,H,1,D)))
    row=[kv(1024) for _ in range(layers)]
    mx.eval([l.state for l in batch],[l.state for l in row])
    m=merge_row_caches([row]); mx.eval([l.state for l in m])
    ref = None
    if way=="now":
        _,t2=T(lambda: mx.eval([l.state for l in [extend_layer(a,b) for a,b in zip(batch,m)]]))
    else:
        _,t2=T(lambda: ([one_copy(a,b) for a,b in zip(batch,m)], mx.eval([l.state for l in batch])))
    newk = mx.random.normal((4,H,1,D))
    outs=[]
    def upd():
        for l in batch: outs.append(l.update_and_fetch(newk, newk))
        mx.eval(outs)
    _,t3=T(upd)
    res.setdefault(way,[]).append((round(t2),round(t3)))
    if rep==3: res[way+"_sum"]=mx.concatenate([o[0].reshape(-1)[: 4*3*(1025)*64] for o in outs[:1]]).sum().item(), [l.keys.shape for l in batch[:1]], batch[0].left_padding.tolist(), batch[0].offset.tolist()
print(res)

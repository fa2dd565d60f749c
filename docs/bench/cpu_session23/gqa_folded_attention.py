"""MLX CPU attention for one decode query per row, 30 layers: mx.fast (unfused on the CPU) against the group's heads folded into the matmul's rows. Run from the repo root: PYTHONPATH=. .venv/bin/python docs/bench/cpu_session23/gqa_folded_attention.py"""
import engine, time
import mlx.core as mx
def timeit(f, *a):
    def run():
        mx.eval([f(*a) for _ in range(30)])
    run(); t=time.perf_counter()
    for _ in range(5): run()
    return (time.perf_counter()-t)/5*1e3
def fast(q,k,v): return mx.fast.scaled_dot_product_attention(q,k,v,scale=0.125)
def ops(q,k,v):
    B,H,L,D=q.shape; KH=k.shape[1]
    qq=(q*0.125).reshape(B,KH,H//KH*L,D)
    s=qq@k.swapaxes(-1,-2)
    p=mx.softmax(s,axis=-1,precise=True)
    return (p@v).reshape(B,H,L,D)
for B,S in [(4,400),(4,1100),(4,2048),(1,1100)]:
    q=mx.random.normal((B,9,1,64)); k=mx.random.normal((B,3,S,64)); v=mx.random.normal((B,3,S,64)); mx.eval(q,k,v)
    d=mx.abs(fast(q,k,v)-ops(q,k,v)).max().item()
    print(B,S,"fast %.1f  ops %.1f  diff %.2e"%(timeit(fast,q,k,v),timeit(ops,q,k,v),d))

"""Is the folded attention bit-identical to mx.fast.scaled_dot_product_attention on the CPU? (No: 14 of 72 float32 cases differ.)"""
import engine, itertools
import mlx.core as mx
def ops(q,k,v,scale,mask):
    B,H,L,D=q.shape; KH=k.shape[1]; rep=H//KH
    qq=(q*mx.array(scale,q.dtype)).reshape(B,KH,rep*L,D)
    s=qq@k.swapaxes(-1,-2)   # [B,KH,rep*L,S]
    if mask is not None:
        s=s.reshape(B,KH,rep,L,-1)
        if isinstance(mask,str):
            S=k.shape[2]; m=mx.arange(S-L, S)[:,None] >= mx.arange(S)[None]
            s=mx.where(m, s, mx.finfo(s.dtype).min)
        elif mask.dtype==mx.bool_:
            m = mask if mask.ndim<5 else mask
            m = m[:,:,None] if m.ndim==4 else m   # [B,1,1,L,S]? mask [B,H?,L,S]
            s=mx.where(m, s, mx.finfo(s.dtype).min)
        else:
            s=s+mask[:,:,None] if mask.ndim==4 else s+mask
        s=s.reshape(B,KH,rep*L,-1)
    p=mx.softmax(s.astype(mx.float32) if False else s,axis=-1,precise=True)
    return (p@v).reshape(B,KH,rep,L,-1).reshape(B,H,L,-1)
bad=0; n=0
for dt in (mx.float32, mx.float16, mx.bfloat16):
  for B,H,KH,L,S,D in [(1,9,3,1,50,64),(4,9,3,1,1100,64),(3,8,2,5,300,128),(2,16,4,17,900,64),(1,32,8,1,33,128),(2,4,4,3,70,64),(4,12,3,1,257,96)]:
    for mk in ("none","bool","add","causal"):
        if mk=="causal" and L==1: continue
        mx.random.seed(n)
        q=mx.random.normal((B,H,L,D)).astype(dt); k=mx.random.normal((B,KH,S,D)).astype(dt); v=mx.random.normal((B,KH,S,D)).astype(dt)
        mask=None
        if mk=="bool": mask=mx.random.uniform(shape=(B,1,L,S))>0.3
        if mk=="add": mask=(mx.random.uniform(shape=(B,1,L,S))>0.3).astype(dt)*-1e4
        if mk=="causal": mask="causal"
        a=mx.fast.scaled_dot_product_attention(q,k,v,scale=D**-0.5,mask=mask)
        b=ops(q,k,v,D**-0.5,mask)
        same = mx.array_equal(a,b).item(); n+=1
        if not same:
            bad+=1; print("DIFF",dt,B,H,KH,L,S,D,mk, mx.abs(a.astype(mx.float32)-b.astype(mx.float32)).max().item())
print("cases",n,"differ",bad)

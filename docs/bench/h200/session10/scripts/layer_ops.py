"""Where a width-w forward of one llama layer goes, op by op (sync each), widths 1..9."""
import statistics, sys, time
import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.models.base import create_attention_mask, scaled_dot_product_attention
from engine.models import load_model

def t(fn, reps=25):
    for _ in range(3): mx.eval(fn())
    out = []
    for _ in range(reps):
        a = time.perf_counter(); mx.eval(fn()); out.append(time.perf_counter() - a)
    return 1e3 * statistics.median(out)

spec = sys.argv[1]
model = load_model(spec).model
inner = model.model
layer = inner.layers[0]; attn = layer.self_attn
for B in (1, 4):
    cache = make_prompt_cache(model)
    model(mx.ones((B, 256), dtype=mx.uint32) * 7, cache=cache); mx.eval([c.state for c in cache])
    c0 = cache[0]
    for w in (1, 2, 5, 9):
        h = inner.embed_tokens(mx.ones((B, w), dtype=mx.uint32) * 11); mx.eval(h)
        q = attn.q_proj(h).reshape(B, w, attn.n_heads, -1).transpose(0, 2, 1, 3)
        k = attn.k_proj(h).reshape(B, w, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
        v = attn.v_proj(h).reshape(B, w, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
        mx.eval(q, k, v)
        def upd():
            kk, vv = c0.update_and_fetch(k, v); c0.trim(w); return kk, vv
        kk, vv = c0.update_and_fetch(k, v); mx.eval(kk, vv); c0.trim(w)
        mask = create_attention_mask(h, c0)
        def whole_attn():
            o = attn(h, mask=mask, cache=c0); c0.trim(w); return o
        def whole_layer():
            o = layer(h, mask=mask, cache=c0); c0.trim(w); return o
        def whole_model():
            o = model(mx.ones((B, w), dtype=mx.uint32), cache=cache)
            for c in cache: c.trim(w)
            return o
        r = {
            "qkv_proj": t(lambda: [attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)]),
            "rope": t(lambda: attn.rope(q, offset=c0.offset)),
            "update": t(upd),
            "sdpa": t(lambda: scaled_dot_product_attention(q, kk, vv, cache=c0, scale=attn.scale, mask=mask)),
            "mlp": t(lambda: layer.mlp(h)),
            "norm": t(lambda: layer.input_layernorm(h)),
            "attn": t(whole_attn),
            "layer": t(whole_layer),
            "model": t(whole_model, 12),
            "lm_head": t(lambda: model.lm_head(h) if hasattr(model, "lm_head") else inner.embed_tokens.as_linear(h)),
        }
        print(f"{spec} B={B} w={w} mask={mask if isinstance(mask, str) or mask is None else mask.shape}: " + "  ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)

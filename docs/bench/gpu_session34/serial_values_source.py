"""The CUDA sources of the verify-attention kernel (engine/kernels/verify_attention_cuda.py).

Two layouts of one computation: a block per query head, and a block per group of query heads
that share a key head (grouped-query attention), which reads each key once for the group. For
every query head the arithmetic is the same, in the same order; the compiler may contract a
multiply and an add differently in the two, so outputs can differ in the last bit (at most one
bfloat16 step, in 8 of 96 cases measured). On an H100, at four query heads a block, the
grouped layout took a median 0.69x the per-head layout's time at 4-32 rows (0.48-1.2x; the few
losses in calls of 30 us or less) and 0.96x at one row; at one head a block it took 1.18x, so
groups of one keep the per-head layout. In the engine, though, the 8B's plain step over four
long rows took 18-20 ms grouped against 15-17 per head, so one-query calls keep the per-head
layout unless asked (docs/benchmarks.md, twentieth pass); calls of several queries take the
grouped one (a median 0.77x per head at 4-32 rows on an H100, twenty-seventh pass).
"""

# What both layouts begin with: the sizes MLX passes, and (once a block knows its row, key
# head and query) where that row's keys, values and mask start.
_SHAPES = """
  constexpr int PER_LANE = D / 32;
  constexpr int VEC = 16 / sizeof(T);
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int Hq = q_shape[1];
  const int N = q_shape[2];
  const int Hk = k_shape[1];
  const int L = k_shape[2];
"""
_ROW_POINTERS = """
  const int64_t kv = (static_cast<int64_t>(b) * Hk + hk) * L;
  const T* kp = k + kv * D;
  const T* vp = v + kv * D;
  const int mb = mask_shape[0] == 1 ? 0 : b;
  const bool* mp = mask + (static_cast<int64_t>(mb) * N + n) * L;
"""

# MLX wraps this in `__global__ void custom_kernel_<name>(const T* q, const Shape q_shape, ...,
# const bool* mask, const Shape mask_shape, const float* scale, T* out)`; T, D and WARPS become
# `using` / `constexpr int`. q / out [B, Hq, N, D], k / v [B, Hk, L, D], mask [Bm, 1, N, L] with
# Bm 1 or B. Launch: one block of WARPS warps per (b, hq, n).
PER_HEAD_SOURCE = (
    _SHAPES
    + """  const int block = blockIdx.x;
  const int n = block % N;
  const int hq = (block / N) % Hq;
  const int b = block / (N * Hq);
  const int hk = hq / (Hq / Hk);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  __shared__ float qs[D];
  __shared__ float warp_m[WARPS];
  __shared__ float warp_l[WARPS];
  __shared__ float warp_acc[WARPS][D];

  const T* qp = q + ((static_cast<int64_t>(b) * Hq + hq) * N + n) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    qs[d] = static_cast<float>(qp[d]) * scale[0];
  }
  __syncthreads();

"""
    + _ROW_POINTERS
    + """
  float m = NEG_INF;
  float l = 0.0f;
  float acc[PER_LANE];
  #pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    acc[i] = 0.0f;
  }
  for (int base = warp * 32; base < L; base += WARPS * 32) {
    const int j = base + lane;
    float s = NEG_INF;
    if (j < L && mp[j]) {
      const uint4* kj = reinterpret_cast<const uint4*>(kp + static_cast<int64_t>(j) * D);
      float dot = 0.0f;
      #pragma unroll
      for (int c = 0; c < D / VEC; ++c) {
        uint4 raw = kj[c];
        const T* vals = reinterpret_cast<const T*>(&raw);
        #pragma unroll
        for (int e = 0; e < VEC; ++e) {
          dot = fmaf(qs[c * VEC + e], static_cast<float>(vals[e]), dot);
        }
      }
      s = dot;
    }
    float top = s;
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, off));
    }
    if (top == NEG_INF) {
      continue;  // every key of these 32 is masked (padding, holes, the unwritten tail)
    }
    const float m_new = fmaxf(m, top);
    const float keep = expf(m - m_new);
    const float p = s == NEG_INF ? 0.0f : expf(s - m_new);
    float sum = p;
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      sum += __shfl_xor_sync(0xffffffff, sum, off);
    }
    l = l * keep + sum;
    #pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
      acc[i] *= keep;
    }
    for (int t = 0; t < 32; ++t) {
      const float pt = __shfl_sync(0xffffffff, p, t);
      if (pt != 0.0f) {
        const T* vj = vp + static_cast<int64_t>(base + t) * D + lane * PER_LANE;
        #pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
          acc[i] = fmaf(pt, static_cast<float>(vj[i]), acc[i]);
        }
      }
    }
    m = m_new;
  }

  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
  #pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    warp_acc[warp][lane * PER_LANE + i] = acc[i];
  }
  __syncthreads();

  float top = NEG_INF;
  #pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    top = fmaxf(top, warp_m[w]);
  }
  float total = 0.0f;
  #pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    total += warp_m[w] == NEG_INF ? 0.0f : warp_l[w] * expf(warp_m[w] - top);
  }
  T* op = out + ((static_cast<int64_t>(b) * Hq + hq) * N + n) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    #pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      if (warp_m[w] != NEG_INF) {
        o = fmaf(warp_acc[w][d], expf(warp_m[w] - top), o);
      }
    }
    op[d] = static_cast<T>(o / total);
  }
"""
)


# MLX wraps this in `__global__ void custom_kernel_<name>(const T* q, const Shape q_shape, ...,
# const bool* mask, const Shape mask_shape, const float* scale, T* out)`; T, D, WARPS and HEADS
# become `using` / `constexpr int`. q / out [B, Hq, N, D], k / v [B, Hk, L, D], mask [Bm, 1, N, L]
# with Bm 1 or B. Launch: one block of WARPS warps per (b, group of HEADS query heads that share
# a key head, n). Each query head's arithmetic is the same, in the same order, whatever HEADS is.
GROUPED_SOURCE = (
    _SHAPES
    + """  const int groups = Hq / HEADS;  // blocks per row and query
  const int block = blockIdx.x;
  const int n = block % N;
  const int hq0 = ((block / N) % groups) * HEADS;
  const int b = block / (N * groups);
  const int hk = hq0 / (Hq / Hk);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  __shared__ __align__(16) float qs[HEADS][D];  // read four at a time
  __shared__ float warp_m[WARPS][HEADS];
  __shared__ float warp_l[WARPS][HEADS];
  __shared__ float warp_acc[WARPS][D];

  for (int i = threadIdx.x; i < HEADS * D; i += blockDim.x) {
    const int h = i / D;
    const int d = i % D;
    const T* qp = q + ((static_cast<int64_t>(b) * Hq + hq0 + h) * N + n) * D;
    qs[h][d] = static_cast<float>(qp[d]) * scale[0];
  }
  __syncthreads();

"""
    + _ROW_POINTERS
    + """
  float m[HEADS];
  float l[HEADS];
  float acc[HEADS][PER_LANE];
  #pragma unroll
  for (int h = 0; h < HEADS; ++h) {
    m[h] = NEG_INF;
    l[h] = 0.0f;
    #pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
      acc[h][i] = 0.0f;
    }
  }
  for (int base = warp * 32; base < L; base += WARPS * 32) {
    const int j = base + lane;
    const bool live = j < L && mp[j];
    const unsigned alive = __ballot_sync(0xffffffff, live);
    if (alive == 0) {
      continue;  // every key of these 32 is masked (padding, holes, the unwritten tail)
    }
    float s[HEADS];
    #pragma unroll
    for (int h = 0; h < HEADS; ++h) {
      s[h] = 0.0f;
    }
    if (live) {  // the key is read once for every head of the group
      const uint4* kj = reinterpret_cast<const uint4*>(kp + static_cast<int64_t>(j) * D);
      #pragma unroll
      for (int c = 0; c < D / VEC; ++c) {
        uint4 raw = kj[c];
        const T* vals = reinterpret_cast<const T*>(&raw);
        float kf[VEC];
        #pragma unroll
        for (int e = 0; e < VEC; ++e) {
          kf[e] = static_cast<float>(vals[e]);
        }
        #pragma unroll
        for (int h = 0; h < HEADS; ++h) {
          const float4* qv = reinterpret_cast<const float4*>(&qs[h][c * VEC]);
          #pragma unroll
          for (int e = 0; e < VEC / 4; ++e) {
            const float4 q4 = qv[e];
            s[h] = fmaf(q4.x, kf[4 * e], s[h]);
            s[h] = fmaf(q4.y, kf[4 * e + 1], s[h]);
            s[h] = fmaf(q4.z, kf[4 * e + 2], s[h]);
            s[h] = fmaf(q4.w, kf[4 * e + 3], s[h]);
          }
        }
      }
    } else {
      #pragma unroll
      for (int h = 0; h < HEADS; ++h) {
        s[h] = NEG_INF;
      }
    }
    float p[HEADS];
    #pragma unroll
    for (int h = 0; h < HEADS; ++h) {
      float top = s[h];
      #pragma unroll
      for (int off = 16; off > 0; off /= 2) {
        top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, off));
      }
      p[h] = 0.0f;
      if (top != NEG_INF) {
        const float m_new = fmaxf(m[h], top);
        const float keep = expf(m[h] - m_new);
        p[h] = s[h] == NEG_INF ? 0.0f : expf(s[h] - m_new);
        float sum = p[h];
        #pragma unroll
        for (int off = 16; off > 0; off /= 2) {
          sum += __shfl_xor_sync(0xffffffff, sum, off);
        }
        l[h] = l[h] * keep + sum;
        #pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
          acc[h][i] *= keep;
        }
        m[h] = m_new;
      }
    }
    for (int t = 0; t < 32; ++t) {
      if (!((alive >> t) & 1u)) {
        continue;
      }
      const T* vj = vp + static_cast<int64_t>(base + t) * D + lane * PER_LANE;
      float vf[PER_LANE];
      #pragma unroll
      for (int i = 0; i < PER_LANE; ++i) {
        vf[i] = static_cast<float>(vj[i]);
      }
      #pragma unroll
      for (int h = 0; h < HEADS; ++h) {
        const float pt = __shfl_sync(0xffffffff, p[h], t);
        if (pt != 0.0f) {
          #pragma unroll
          for (int i = 0; i < PER_LANE; ++i) {
            acc[h][i] = fmaf(pt, vf[i], acc[h][i]);
          }
        }
      }
    }
  }

  if (lane == 0) {
    #pragma unroll
    for (int h = 0; h < HEADS; ++h) {
      warp_m[warp][h] = m[h];
      warp_l[warp][h] = l[h];
    }
  }
  #pragma unroll
  for (int h = 0; h < HEADS; ++h) {
    #pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
      warp_acc[warp][lane * PER_LANE + i] = acc[h][i];
    }
    __syncthreads();
    float top = NEG_INF;
    #pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      top = fmaxf(top, warp_m[w][h]);
    }
    float total = 0.0f;
    #pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      total += warp_m[w][h] == NEG_INF ? 0.0f : warp_l[w][h] * expf(warp_m[w][h] - top);
    }
    T* op = out + ((static_cast<int64_t>(b) * Hq + hq0 + h) * N + n) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float o = 0.0f;
      #pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        if (warp_m[w][h] != NEG_INF) {
          o = fmaf(warp_acc[w][d], expf(warp_m[w][h] - top), o);
        }
      }
      op[d] = static_cast<T>(o / total);
    }
    __syncthreads();  // warp_acc is the next head's
  }
"""
)

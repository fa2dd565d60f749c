"""How many tokens per row a verify forward carries: its drafts' width, widened where that is cheaper.

On MLX's CUDA backend a matmul of one row runs a GEMV kernel and every other row count runs
cuBLASLt, whose kernels for two to five rows cost more than for six to eight: the random 8B's
projections summed per step took 12.0-13.4 ms at 2-5 rows against 10.2-11.7 at 6-8 on an H100
(docs/benchmarks.md, eleventh pass; the ninth pass agreed). A verify forward of one row at k=4
multiplies five rows, so one position of padding more (a token no row keeps, given back with
the rejected drafts) makes the round cheaper. Padding one more position per row costs every
layer's attention a query more, which at these widths is small against the projections.

Rows whose recurrent layers would take the padding into their state are never widened (their
state would then be recomputed for every row). On the CPU and Metal nothing is widened: their
matmuls cost about in proportion to the rows.
"""

from __future__ import annotations

# a verify forward of fewer tokens than this (rows x width) on CUDA is widened to reach it
DEFAULT_CUDA_MIN_TOKENS = 6


def forward_width(rows: int, width: int, *, min_tokens: int) -> int:
    """Tokens per row for a verify forward of `rows` rows whose longest input is `width`."""
    if rows <= 0 or width < 2 or rows * width >= min_tokens:
        return width
    return -(-min_tokens // rows)

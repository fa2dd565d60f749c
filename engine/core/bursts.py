"""Which decoding rows are owed a bounded gap by other requests' prompt work.

The prefill pacer (engine/core/prefill_pacer.py) keeps running chats' gap between tokens bounded
while a prompt is processed beside them. That promise is for rows that were already talking when
the prompt came. Requests that arrive together (a burst: several tabs at once, a server's
clients) are a different case: mlx-lm's BatchGenerator prefills them all before any row decodes,
and paced against its own first rows a burst of 16 prompts of 256 tokens joined the batch one
row every four steps on the 2-core CPU. Their prompts go in whole chunks instead.
"""

from __future__ import annotations

from engine.core.request_state import RequestState

# requests that arrive this close together are one burst (while one of them has not joined)
DEFAULT_BURST_S = 0.25


def owed_a_gap(
    rows: list[RequestState], prompts: list[RequestState], *, burst_s: float = DEFAULT_BURST_S
) -> bool:
    """Whether some decoding row of `rows` waits on work for `prompts` (their chunks, or a
    drafter catching up on their histories) with a promise of a bounded gap: every row but those
    of the prompts' own burst, which arrived within `burst_s` of each prompt and joined the batch
    after it arrived. (Over every pair of row and prompt, in one pass over each list.)"""
    if not rows or not prompts:
        return False
    joined = [r.joined_at for r in rows]
    if any(t is None for t in joined):
        return True
    came, asked = [r.arrival for r in rows], [p.arrival for p in prompts]
    if min(joined) <= max(asked):  # a row decoded before a prompt arrived
        return True
    return max(max(came) - min(asked), max(asked) - min(came)) > burst_s

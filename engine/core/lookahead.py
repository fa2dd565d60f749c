"""Verify rounds pipelined like plain steps: round n+1 is queued before round n is read back.

A verify round used to run in series: read back the last tokens, draft from them, build and
queue the forward, wait, read back, roll back. The device idled while the host drafted and built
the graph, so a round cost 1.4-2.7x a pipelined plain step even where the model cost nothing
(docs/benchmarks.md, the host-cost ladder). Here acceptance stays on the device: each row's
accepted count and the target's next token (the bonus) are computed there, the row's unkept
positions leave it lazily (`RaggedBatchKVCache.give_back_lazily`: its RoPE offset drops and the
mask hides them), and the bonus is round n+1's input without being read back.

Round n+1's drafts are made on the host before round n's outcome is known, from a guessed
history: that the row keeps its whole draft of round n, or none of it where that draft was itself
drawn on a guess that proved wrong. Every round is still verified against the target, so a wrong
guess costs speed (the row's drafts are rejected), never exactness. Only drafters that draft from
tokens alone take part (`Drafter.drafts_ahead`: prompt lookup, the synthetic benchmark drafter);
the tokens are greedy (argmax of log-probabilities, as mlx-lm), and the caches are ragged KV
caches (no recurrent, quantized or sliding-window layers). Anything else runs the serial round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import mlx.core as mx

from engine.cache.cache_list import leaves
from engine.cache.ragged import RaggedBatchKVCache
from engine.core.batch import DecodeBatch
from engine.core.drafter_inputs import DrafterInputs
from engine.core.proposals import propose
from engine.core.step_plan import DecodeRow, StepOutput, TokenRun
from engine.sampling import log_softmax
from engine.speculative.drafter import Drafter, VerifyFeedback, proposes_for_itself

NO_DRAFT = -1  # a padded draft position: no token id equals it, so it is never accepted


@dataclass
class AheadRound:
    """A verify round queued on the device whose outcome has not been read back."""

    drafts: list[list[int]]
    used: list[str | None]  # the drafter of each row's draft
    width: int  # tokens per row in the forward (1 + the longest draft)
    targets: mx.array  # [B, width] the target's greedy tokens
    accepted: mx.array  # [B] draft tokens kept
    # per row, the accepted count of the round before that its draft assumed (None: it was
    # drafted on a known history); a wrong assumption makes the draft `stale`
    assumed: list[int | None]
    stale: list[bool]


def can_run_ahead(batch: DecodeBatch, plan: list[DecodeRow], drafters: dict[str, Drafter]) -> bool:
    """Whether this round can be queued before the last one is read back (see above)."""
    if not any(r.k for r in plan) or batch.unbatched or batch.recurrent:
        return False
    if batch.kv is not None or batch.wants_hidden or batch.replaying:
        return False
    for row in plan:
        sampler = row.state.sampler
        if not sampler.greedy or sampler.uses_context:
            return False
        if row.k and not getattr(drafters.get(row.drafter or ""), "drafts_ahead", False):
            return False
    if batch.solo:
        return True  # its plain KVCache becomes a ragged batch cache on launch
    return all(type(layer) is RaggedBatchKVCache for layer in leaves(batch.cache))


def guessed_rows(
    plan: list[DecodeRow], histories: list[list[int]], last: AheadRound | None
) -> tuple[list[DecodeRow], list[list[int]], list[int | None]]:
    """What each row drafts from while `last` is in flight: its history as if it kept all of
    its draft in `last` (none where that draft was stale), and one token more to ask for, as
    the first proposal only guesses the bonus that round will add. Returns the rows to propose
    for, their histories and the accepted counts assumed."""
    if last is None:
        return plan, histories, [None] * len(plan)
    rows, guessed, assumed = [], [], []
    for row, history, draft, stale in zip(plan, histories, last.drafts, last.stale):
        keep = 0 if stale else len(draft)
        rows.append(replace(row, k=row.k + 1) if row.k else row)
        guessed.append(history + draft[:keep])
        assumed.append(keep)
    return rows, guessed, assumed


def launch(
    batch: DecodeBatch,
    drafts: list[list[int]],
    used: list[str | None],
    assumed: list[int | None],
) -> AheadRound:
    """Queue one verify forward over each row's pending input (possibly still on the device)
    and draft, accept on the device, give back the unkept positions lazily, and make the
    bonus tokens the next inputs. Nothing is read back."""
    if batch.solo:
        batch._leave_solo()
    batch._last_round = None
    assert batch.inputs is not None
    width = 1 + max(len(d) for d in drafts)
    padded = [d + [NO_DRAFT] * (width - 1 - len(d)) for d in drafts]
    proposed = mx.array(padded, dtype=mx.int32).reshape(len(drafts), width - 1)
    tokens = mx.concatenate([batch.inputs[:, None], mx.maximum(proposed, 0).astype(mx.uint32)], 1)
    _, logits = batch._forward(tokens)
    targets = mx.argmax(log_softmax(logits), axis=-1)  # as mlx-lm: in the logits dtype
    matched = (proposed == targets[:, : width - 1].astype(mx.int32)).astype(mx.int32)
    accepted = mx.cumprod(matched, axis=1).sum(axis=1)
    bonus = mx.take_along_axis(targets, accepted[:, None], axis=1)[:, 0]
    for layer in leaves(batch.cache):
        layer.give_back_lazily(width, accepted + 1)
    batch.inputs = bonus.astype(mx.uint32)
    batch.input_is_sampled = [False] * len(batch.rows)
    mx.async_eval(targets, accepted, batch.inputs)
    stale = [False] * len(drafts)
    return AheadRound(drafts, used, width, targets, accepted, assumed, stale)


def read_back(
    batch: DecodeBatch, done: AheadRound, following: AheadRound | None
) -> tuple[list[list[int]], list[int]]:
    """`done`'s target tokens and accepted counts, read back: its given-back positions become
    holes, the rows' lengths grow by what they kept, and `following` (queued after it) learns
    which of its drafts were drawn on a wrong guess."""
    mx.eval(done.targets, done.accepted)
    targets, accepted = done.targets.tolist(), done.accepted.tolist()
    kept = [a + 1 for a in accepted]
    for layer in leaves(batch.cache):
        layer.settle(kept)
    batch.lengths = [n + k for n, k in zip(batch.lengths, kept)]
    if following is not None:
        following.stale = [a is not None and a != n for a, n in zip(following.assumed, accepted)]
    return targets, accepted


class RoundsAhead:
    """Runs a batch's verify rounds ahead (see above): at most one round is in flight, read
    back while the next one runs; `settle` reads it back before anything else touches the
    batch (rows leaving or joining, a serial round, a plain step)."""

    def __init__(
        self,
        batch: DecodeBatch,
        drafters: dict[str, Drafter],
        inputs: DrafterInputs,
        *,
        on: bool,
    ) -> None:
        self.batch = batch
        self.drafters = drafters
        self.inputs = inputs
        self.configured = self.on = on  # EngineConfig.verify_ahead (`on`: a benchmark may switch)
        self.in_flight: AheadRound | None = None

    def takes(self, plan: list[DecodeRow], riders: list) -> bool:
        """Whether this round runs ahead (prompt chunks riding on it: in series)."""
        return self.on and not riders and can_run_ahead(self.batch, plan, self.drafters)

    def round(
        self, plan: list[DecodeRow], out: StepOutput, while_waiting: Callable[[], None]
    ) -> tuple[list[list[int]], int]:
        """Queue this round, then read back the one before; returns this round's drafts and
        width."""
        batch, last = self.batch, self.in_flight
        t0 = time.perf_counter()
        if last is None:  # the pending inputs are known: draft from them
            for state, token in batch.flush():
                out.add_run(state.request_id, TokenRun([token]))
            histories = out.histories(batch.rows)
        else:  # the rows' states hold everything up to `last`'s pending input
            histories = [s.history for s in batch.rows]
        rows, guessed, assumed = guessed_rows(plan, histories, last)
        drafts, used = propose(self.drafters, self.inputs, rows, guessed, out)
        if last is not None:  # the first proposal guessed the bonus `last` adds
            drafts = [d[1:] if row.k else d for d, row in zip(drafts, plan)]
        t1 = time.perf_counter()
        self.in_flight = launch(batch, drafts, used, assumed)
        t_launched = time.perf_counter()
        while_waiting()
        t_waited = time.perf_counter()
        if last is not None:
            self._emit(last, out, following=self.in_flight)
        t2 = time.perf_counter()
        timing = out.timing
        timing.verify_rounds += 1
        timing.plan_s += t1 - t0
        timing.forward_s += (t_launched - t1) + (t2 - t_waited)
        timing.output_s += t_waited - t_launched
        out.draft_s, out.verify_s, out.sample_s = t1 - t0, t2 - t1, 0.0
        return drafts, self.in_flight.width

    def settle(self, out: StepOutput) -> None:
        """Read back the round in flight, if any, and report its tokens in `out`."""
        done, self.in_flight = self.in_flight, None
        if done is not None:
            self._emit(done, out, following=None)

    def _emit(self, done: AheadRound, out: StepOutput, *, following: AheadRound | None) -> None:
        targets, accepted = read_back(self.batch, done, following)
        feedback: dict[str, list[VerifyFeedback]] = {}
        for state, draft, used, target, n, stale in zip(
            self.batch.rows, done.drafts, done.used, targets, accepted, done.stale
        ):
            drafter = self.drafters.get(used) if used is not None and draft else None
            kind = (drafter.kind or drafter.name) if drafter is not None else None
            tokens = target[: n + 1]
            run = TokenRun(tokens, draft, n, used, kind, guessed=stale and bool(draft))
            out.add_run(state.request_id, run)
            if drafter is not None and proposes_for_itself(drafter):
                feedback.setdefault(used, []).append(
                    VerifyFeedback(state.request_id, draft, n, tokens)
                )
        for name, items in feedback.items():
            self.drafters[name].learn(items)

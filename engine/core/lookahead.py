"""Verify rounds pipelined like plain steps: round n+1 is queued before round n is read back.

A verify round used to run in series: read back the last tokens, draft from them, build and
queue the forward, wait, read back, roll back. The device idled while the host drafted and built
the graph, so a round cost 1.4-2.7x a pipelined plain step even where the model cost nothing
(docs/benchmarks.md, the host-cost ladder). Here acceptance stays on the device: each row's
accepted count and the target's next token (the bonus) are computed there, the row's unkept
positions leave it lazily (`RaggedBatchKVCache.give_back_lazily`: its RoPE offset drops and the
mask hides them), and the bonus is round n+1's input without being read back. (On MLX's CPU
backend nothing overlaps: its `async_eval` waits until all but ten ops of a forward have run.)

Round n+1's drafts are made on the host before round n's outcome is known, from a guessed
history: that the row keeps its whole draft of round n, or none of it where that draft was itself
drawn on a guess that proved wrong. Every round is still verified against the target, so a wrong
guess costs speed (the row's drafts are rejected), never exactness. Only drafters that draft from
tokens alone take part (`Drafter.drafts_ahead`: prompt lookup, the synthetic benchmark drafter);
the rows are greedy without a repetition penalty, and the caches are ragged KV caches (no
recurrent, quantized or sliding-window layers); anything else runs the serial round.

The greedy token is mlx-lm's, argmax of log-probabilities. On a GPU the device computes those.
On a CPU, where log-probabilities over the vocabulary cost as much as a small model's forward,
the device takes the raw argmax, as the serial round does, and counts near ties; where a tie
decided a kept token, the host takes mlx-lm's token when it reads the round back and corrects
the row (its offset and next input; its part of the round already queued read a wrong input
and is void).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import mlx.core as mx

from engine.cache.cache_list import leaves
from engine.cache.ragged import RaggedBatchKVCache, settle_layers
from engine.core.ahead_choice import AheadChoice
from engine.core.batch import DecodeBatch
from engine.core.drafter_feedback import DrafterFeedback, drafter_kind
from engine.core.drafter_inputs import DrafterInputs
from engine.core.proposals import propose
from engine.core.step_plan import DecodeRow, StepOutput, TokenRun
from engine.sampling import log_softmax, near_ties, tie_broken
from engine.speculative.drafter import Drafter

NO_DRAFT = -1  # a padded draft position: no token id equals it, so it is never accepted


@dataclass
class AheadRound:
    """A verify round queued on the device whose outcome has not been read back."""

    drafts: list[list[int]]
    used: list[str | None]  # the drafter of each row's draft
    width: int  # tokens per row in the forward (1 + the longest draft)
    targets: mx.array  # [B, width] the target's greedy tokens (raw argmax where `near` is kept)
    accepted: mx.array  # [B] draft tokens kept
    # per row, the accepted count of the round before that its draft assumed (None: it was
    # drafted on a known history); a wrong assumption makes the draft `stale`
    assumed: list[int | None]
    stale: list[bool]
    # On a CPU the device picks the raw argmax, as the serial round does: `near` [B, width]
    # counts the logits nearly tied with the largest, and where a tie changes a token the
    # host corrects the row (`read_back`) from `logits`. None on a GPU (exact on the device).
    near: mx.array | None = None
    logits: mx.array | None = None
    # rows whose input in this round proved wrong (a tie corrected the round before): they
    # keep nothing of it and report nothing
    void: list[bool] = field(default_factory=list)
    wait_s: float = 0.0  # how long `read_back` waited for the device


def raw_argmax(logits: mx.array) -> mx.array:
    """The device's pick on a CPU, before the host breaks near ties (`read_back`)."""
    return mx.argmax(logits, axis=-1)


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
    the first proposal only guesses the bonus that round will add. A row whose part of `last`
    is void drafts from its history as it is (it ends with its pending input). Returns the
    rows to propose for, their histories and the accepted counts assumed (None: none)."""
    if last is None:
        return plan, histories, [None] * len(plan)
    rows, guessed, assumed = [], [], []
    for i, (row, history) in enumerate(zip(plan, histories)):
        if last.void[i]:
            rows.append(row)
            guessed.append(history)
            assumed.append(None)
            continue
        keep = 0 if last.stale[i] else len(last.drafts[i])
        rows.append(replace(row, k=row.k + 1) if row.k else row)
        guessed.append(history + last.drafts[i][:keep])
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
    batch._last_round = None  # no serial round to store a leaving row from
    assert batch.inputs is not None
    width = 1 + max(len(d) for d in drafts)
    padded = [d + [NO_DRAFT] * (width - 1 - len(d)) for d in drafts]
    proposed = mx.array(padded, dtype=mx.int32).reshape(len(drafts), width - 1)
    tokens = mx.concatenate([batch.inputs[:, None], mx.maximum(proposed, 0).astype(mx.uint32)], 1)
    _, logits = batch._forward(tokens)
    near = None
    if mx.default_device().type == mx.DeviceType.gpu:
        targets = mx.argmax(log_softmax(logits), axis=-1)  # as mlx-lm: in the logits' dtype
    else:  # log-probabilities over the vocabulary cost a small model's forward on a CPU
        targets, near = raw_argmax(logits), near_ties(logits)
    matched = (proposed == targets[:, : width - 1].astype(mx.int32)).astype(mx.int32)
    accepted = mx.cumprod(matched, axis=1).sum(axis=1)
    bonus = mx.take_along_axis(targets, accepted[:, None], axis=1)[:, 0]
    kept = accepted + 1
    unkept = width - kept
    for layer in leaves(batch.cache):
        layer.give_back_lazily(width, kept, unkept=unkept)
    batch.inputs = bonus.astype(mx.uint32)
    batch.input_is_sampled = [False] * len(batch.rows)
    mx.async_eval(targets, accepted, batch.inputs, *([near] if near is not None else []))
    rows = len(drafts)
    return AheadRound(
        drafts,
        used,
        width,
        targets,
        accepted,
        assumed,
        stale=[False] * rows,
        near=near,
        logits=logits if near is not None else None,  # kept to break ties on the host
        void=[False] * rows,
    )


def read_back(
    batch: DecodeBatch, done: AheadRound, following: AheadRound | None
) -> tuple[list[list[int]], list[int]]:
    """`done`'s tokens and accepted counts per row (tokens: the accepted draft and the target's
    own next token), read back: near ties broken as mlx-lm breaks them (a row they change is
    corrected, and its part of `following` made void), the given-back positions become holes,
    the rows' lengths grow by what they kept, and `following` learns which of its drafts were
    drawn on a wrong guess."""
    start = time.perf_counter()
    mx.eval(done.targets, done.accepted, *([done.near] if done.near is not None else []))
    done.wait_s = time.perf_counter() - start
    targets, accepted = done.targets.tolist(), done.accepted.tolist()
    if done.near is not None:
        _break_ties(batch, done, following, targets, accepted)
    kept = []
    for i, void in enumerate(done.void):
        if void:  # keeps nothing: its positions are holes, its tokens not reported
            targets[i], accepted[i] = [], 0
        kept.append(0 if void else accepted[i] + 1)
    settle_layers(leaves(batch.cache), kept)
    batch.lengths = [n + k for n, k in zip(batch.lengths, kept)]
    if following is not None:
        following.stale = [a is not None and a != n for a, n in zip(following.assumed, accepted)]
    return [t[: a + 1] for t, a in zip(targets, accepted)], accepted


def _break_ties(
    batch: DecodeBatch,
    done: AheadRound,
    following: AheadRound | None,
    targets: list[list[int]],
    accepted: list[int],
) -> int:
    """Where a near tie decided a token the row kept, take mlx-lm's token there (`targets`
    and `accepted` change in place). A row whose tokens change is corrected on the device: its
    offset, its part of `following` (void: it read the wrong input) and its next input.
    Returns how many rows changed."""
    near = done.near.tolist()
    changed: dict[int, int] = {}  # row -> its true next input
    for i, draft in enumerate(done.drafts):
        if done.void[i] or not any(c > 1 for c in near[i][: accepted[i] + 1]):
            continue
        before, bonus = accepted[i], targets[i][accepted[i]]
        for j in range(len(targets[i])):
            if near[i][j] > 1:
                targets[i][j] = tie_broken(done.logits[i, j])
            if j >= len(draft) or draft[j] != targets[i][j]:
                accepted[i] = j
                break
        if (accepted[i], targets[i][accepted[i]]) != (before, bonus):
            changed[i] = targets[i][accepted[i]]
    if not changed:
        return 0
    rows = len(done.drafts)
    old = done.accepted.tolist()
    delta = mx.array([accepted[i] - old[i] if i in changed else 0 for i in range(rows)])
    hit = mx.array([i in changed for i in range(rows)])
    void = None
    if following is not None:  # its part for these rows read a wrong input: it keeps nothing
        delta = delta - mx.where(hit, following.accepted + 1, 0)
        void = hit
        for i in changed:
            following.void[i] = True
    for layer in leaves(batch.cache):
        layer.correct_rows(delta, void)
    true_next = mx.array([changed.get(i, 0) for i in range(rows)], dtype=mx.uint32)
    batch.inputs = mx.where(hit, true_next, batch.inputs)
    return len(changed)


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
        on: bool | None,
        vocab_size: int | None = None,
    ) -> None:
        self.batch = batch
        self.vocab_size = vocab_size
        self.drafters = drafters
        self.inputs = inputs
        # EngineConfig.verify_ahead: always, never, or None: as `choice` measures per batch
        # size (`on`: a benchmark may switch)
        self.configured = self.on = on
        self.choice = AheadChoice()
        self.in_flight: AheadRound | None = None
        # for `choice`: whether this step's round, one that may run ahead, did; and the last
        # such step that took no prompt work: (rows, ran ahead, tokens reported, when it
        # began). Steps where rows left are timed too: rounds ahead drain there.
        self.way: bool | None = None
        self._timed: tuple[int, bool, int, float] | None = None

    def eligible(self, plan: list[DecodeRow], riders: list) -> bool:
        """Whether this round may run ahead (prompt chunks riding on it: in series)."""
        return (
            self.on is not False and not riders and can_run_ahead(self.batch, plan, self.drafters)
        )

    def forget(self) -> None:
        """Drop the round in flight and the step being timed (the batch was reset)."""
        self.in_flight = self._timed = None

    def step_began(self, began: float, *, decoding: bool) -> None:
        """A step begins: the last timed step cost the time since it began, if rows ran on."""
        if self._timed is not None and decoding and self.on is None:
            rows, ahead, tokens, start = self._timed
            self.choice.record(rows, ahead=ahead, seconds=began - start, tokens=tokens)
        self._timed = self.way = None

    def step_ended(self, out: StepOutput, began: float, *, prompts: bool) -> None:
        """The step that began at `began` ended; timed for `choice` unless it had prompt work."""
        if not prompts and self.way is not None:
            tokens = sum(len(run.tokens) for runs in out.runs.values() for run in runs)
            self._timed = (len(self.batch), self.way, tokens, began)

    def wants(self) -> bool:
        """Whether an eligible round runs ahead: always, or as the choice measured."""
        return bool(self.on) or self.choice.wants_ahead(len(self.batch))

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
        drafts, used = propose(
            self.drafters, self.inputs, rows, guessed, out, vocab_size=self.vocab_size
        )
        # a row drafting on a guess asked one more: its first proposal guessed `last`'s bonus
        drafts = [d if a is None else d[1:] for d, a in zip(drafts, assumed)]
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
        timing.verify_launch_s += t_launched - t1
        timing.verify_wait_s += last.wait_s if last is not None else 0.0
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
        feedback = DrafterFeedback(self.drafters)
        for state, draft, used, tokens, n, stale, void in zip(
            self.batch.rows, done.drafts, done.used, targets, accepted, done.stale, done.void
        ):
            if void:  # it read a wrong input: nothing of it counts
                continue
            kind = drafter_kind(self.drafters, used) if draft else None
            run = TokenRun(tokens, draft, n, used, kind, guessed=stale and bool(draft), ahead=True)
            out.add_run(state.request_id, run)
            feedback.add(used, state.request_id, draft, n, tokens)
        feedback.teach()

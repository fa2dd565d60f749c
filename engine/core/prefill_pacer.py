"""How many prompt tokens a step may prefill while other chats are decoding.

A long prompt is processed in chunks between decode steps. A fixed chunk makes running chats wait
for it: on a 2-core CPU a 512-token chunk deep into a long prompt took seconds, and every running
chat waited that long between two tokens. The pacer measures a decode step on this machine and
how long each step with prefill took, and resizes the chunk after each such step so that the step
takes about `gap_factor` decode steps: running chats keep a bounded gap, and the prompt still gets
(gap_factor - 1) / gap_factor of the time. Measuring the step itself, not a model of its cost,
keeps it right as the prompt's context grows and on machines where a small forward has a large
fixed cost.

Where a step with prefill has a fixed cost that alone breaks the gap (on a GPU every new shape of
forward and every row joining the batch costs tens of milliseconds, against a decode step of a
few), smaller chunks cannot keep the gap: they only add more such steps, and a burst of chats
arriving together was admitted one row per step (0.7 s until 32 rows had a first token on the
H200, against BatchGenerator's 0.2 s). The pacer fits a line (fixed + per-token cost) to the
chunk sizes it has seen (prompts processed alone included), and in that case takes chunks whose
tokens cost about what the fixed part costs: each such step at most twice its least, and as few
of them as that allows. The line also sizes the first chunk beside decoding rows; otherwise the
last step's own cost resizes the chunk, which follows a prompt whose tokens grow dearer as its
context grows (a line over older steps lags behind it).

On CUDA most of that fixed cost was one thing: a forward over a number of tokens not seen before
builds its attention graph (cuDNN), 25-30 ms for a 1B model on the H200 where the same forward
again takes 5-7 ms. A pacer that picks any size pays it on most steps. There (`pow2`) a chunk
beside decoding rows is a power of two, so a process builds at most a dozen such graphs in its
life, and the pacer then measures what the tokens really cost. Its budget stops below a power whose
steps broke the gap, and a step more than twice its size's median (a graph built again) resizes it
from that median: halved from the stall, the next steps took sizes never built, each a stall
itself. A prompt's last tokens go as powers of two too (300 = 256 + 32 + 8 + 4), each a step,
unless the model's caches can drop positions again (`pad_tail`: plain KV caches): then the rest
goes in one step, padded with filler tokens up to the power of two above it (the 2,047 tokens a
2,048-token prompt prefills took eleven steps on the H200, 1024 + 512 + ... + 1, the last seven of
them 13-21 ms each for a random 8B whose decode step takes 8-14; padded, 1024 + 1023 take two). The
filler sits after the chunk's tokens, so causal attention keeps it out of them, and it is trimmed
off the cache after the forward. Metal and the CPU have no such cost and take the chunk as it is.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque
from dataclasses import dataclass, field

from engine.config import DEFAULT_PREFILL_GAP_FACTOR
from engine.core.size_costs import SizeCosts

log = logging.getLogger(__name__)

DEFAULT_MIN_CHUNK = 16  # below this a prompt would barely move
DEFAULT_FIRST_CHUNK = 64  # beside decoding rows, before a step with prefill was measured
DEFAULT_DECODE_WINDOW = 15  # decode steps whose median is the decode step
MAX_RESIZE = 2.0  # the chunk changes at most this factor per step (one noisy step moves it little)


@dataclass(frozen=True)
class CostLine:
    """What the prompt's share of a step costs: `fixed_s` plus `per_token_s` per token."""

    fixed_s: float
    per_token_s: float

    def tokens_for(self, seconds: float) -> float:
        return (seconds - self.fixed_s) / self.per_token_s


@dataclass(frozen=True)
class PacedStep:
    """One observed step, for a trace: its prompt tokens, whether rows decoded beside them, its
    wall time, the chunk the pacer chose next, and the rows it joined to the batch."""

    prefill_tokens: int
    decoding: bool
    seconds: float
    next_chunk: int | None
    joined: int = 0  # rows whose prompt was done, merged into the batch in this step
    catch_up_s: float = 0.0  # drafters catching up on new rows' histories, left out of `seconds`


@dataclass
class PrefillPacer:
    """Each step's prefill budget, resized from the measured cost of the last steps."""

    max_chunk: int
    gap_factor: float | None = DEFAULT_PREFILL_GAP_FACTOR  # None: always whole chunks
    pow2: bool = False  # chunks beside decoding rows are powers of two (see above)
    pad_tail: bool = False  # the row's cache can drop filler tokens after a chunk (see above)
    min_chunk: int = DEFAULT_MIN_CHUNK
    # the last steps that only decoded; their median is a decode step (a mean followed the odd
    # slow step: on the H200 it read 16 ms where the chats' median gap was 8)
    decode_times: deque[float] = field(default_factory=lambda: deque(maxlen=DEFAULT_DECODE_WINDOW))
    chunk: int | None = None  # the budget while rows decode (None: not measured yet)
    # prompt tokens and the seconds they added to a step, the latest few by power of two of size
    costs: SizeCosts = field(default_factory=SizeCosts)
    trace: list[PacedStep] | None = None  # a list: every observed step is appended (benchmarks)
    # rows of other models decode on this thread between this model's steps, and the least of
    # their decode steps (None: not measured yet); the worker sets both before each step
    others_decoding: bool = False
    others_decode_s: float | None = None

    def budget(self, *, paced: bool) -> int:
        """Prompt tokens the next step may process (`paced`: running rows are owed their gap)."""
        if self.gap_factor is None or not paced:
            return self.max_chunk  # nobody waits
        chunk = self.chunk
        if chunk is None:  # the first step with prefill beside decoding rows
            line, decode_s = self.cost_line(), self.decode_s or self.others_decode_s
            if line is None or decode_s is None:
                chunk = DEFAULT_FIRST_CHUNK
            else:
                chunk = round(self._target(line, self._wanted(decode_s))[0])
                log.debug("first chunk beside decoding rows: %d (line %s)", chunk, line)
        return max(self.min_chunk, min(self.max_chunk, chunk))

    def fit(self, tokens: int, *, paced: bool, ends_prompt: bool = False) -> tuple[int, int]:
        """(the part of a row's `tokens` (> 0, within the budget) that one step takes, filler
        tokens after it). `ends_prompt`: they are the rest of the row's prompt."""
        if not (self.pow2 and paced and self.gap_factor is not None):
            return tokens, 0
        shape = 1 << (tokens - 1).bit_length()  # the power of two at or above
        if ends_prompt and self.pad_tail and shape - tokens <= max(tokens // 2, self.min_chunk):
            return tokens, shape - tokens  # one step, not one per bit of the rest
        return 1 << (tokens.bit_length() - 1), 0

    def observe(
        self,
        seconds: float,
        *,
        prefill_tokens: int,
        decoding: bool,
        paced: bool = True,
        joined: int = 0,
        catch_up_s: float = 0.0,
    ) -> None:
        """One step's wall time, with what it did (`paced`: its prompt tokens were sized for
        the decoding rows' gap, not a burst's whole chunks; `catch_up_s`: for the trace only,
        the seconds left out of it for drafters catching up)."""
        self._observe(seconds, prefill_tokens=prefill_tokens, decoding=decoding, paced=paced)
        if self.trace is not None:
            self.trace.append(
                PacedStep(prefill_tokens, decoding, seconds, self.chunk, joined, catch_up_s)
            )

    def _observe(self, seconds: float, *, prefill_tokens: int, decoding: bool, paced: bool) -> None:
        if seconds <= 0 or self.gap_factor is None:
            return
        if not decoding:  # a prompt alone: its whole cost is the prompt's
            if prefill_tokens > 0:
                self.costs.remember(prefill_tokens, seconds)
                if paced and self.others_decoding and self.others_decode_s is not None:
                    # another model's chats wait through this step: paced by their decode
                    # step, one-offs priced at the median as beside this model's own rows
                    usual = self.costs.usual(prefill_tokens, seconds)
                    self._resize(prefill_tokens, usual, self._wanted(self.others_decode_s))
            return
        if prefill_tokens == 0:
            self.decode_times.append(seconds)
            return
        if self.decode_s is None:
            return
        spent = max(seconds - self.decode_s, 1e-6)  # what the prompt's tokens took
        self.costs.remember(prefill_tokens, spent)
        if paced:  # a burst's whole chunk says what tokens cost, not what keeps the gap
            usual = self.costs.usual(prefill_tokens, spent)  # one-offs priced at the median
            self._resize(prefill_tokens, usual, self._wanted(self.decode_s))

    def _resize(self, prefill_tokens: int, spent: float, wanted: float) -> None:
        """The next budget, from `prefill_tokens` that took `spent` where `wanted` keeps the gap."""
        line = self.cost_line()
        if line is not None and self._gap_unreachable(line, wanted):
            target, grow = self._target(line, wanted)
        elif line is None and prefill_tokens <= self.min_chunk and spent > wanted:
            target, grow = MAX_RESIZE * prefill_tokens, MAX_RESIZE  # a second size to fit a line
        else:
            base = prefill_tokens
            if self.pow2 and self.chunk is not None and prefill_tokens < self.chunk:
                # the step took the power of two below the budget: move the budget itself, or a
                # budget whose growth per step stays below 2x never reaches the next power
                base = self.chunk
            target, grow = base * wanted / spent, MAX_RESIZE
            if self.pow2:
                target = self._below_dear_powers(target, prefill_tokens, wanted)
        current = self.chunk if self.chunk is not None else prefill_tokens
        target = min(max(target, current / MAX_RESIZE), current * grow)
        self.chunk = max(self.min_chunk, min(self.max_chunk, round(target)))
        log.debug(
            "%d prompt tokens took %.1f ms (wanted %.1f ms), line %s: next chunk %d",
            prefill_tokens,
            1e3 * spent,
            1e3 * wanted,
            line,
            self.chunk,
        )

    def _below_dear_powers(self, target: float, taken: int, wanted: float) -> float:
        """On CUDA the budget moves past the power a step took (see `_resize`); it stops below
        a power whose measured steps broke the gap, or a prompt beside chats tried that power
        again and again (a random 8B on an H100 went 256 to 512 tokens, 25 to 64 ms a step
        against a 10-ms decode step, once every few steps)."""
        power = 1 << (max(round(target), 1).bit_length() - 1)
        while power > taken:
            cost = self.costs.median(power)
            if cost is None or cost <= wanted:
                break
            target, power = power - 1, power // 2
        return target

    def share_s(self, *, paced: bool) -> float | None:
        """Seconds a step's prompt work may add beside decoding rows and keep their gap
        ((gap_factor - 1) decode steps); None: nobody waits or always whole chunks; 0 until a
        decode step was measured (the least work)."""
        if self.gap_factor is None or not paced:
            return None
        decode_s = self.decode_s or self.others_decode_s
        return 0.0 if decode_s is None else self._wanted(decode_s)

    @property
    def decode_s(self) -> float | None:
        """A step that only decodes: the median of the last ones (None: none seen yet)."""
        return statistics.median(self.decode_times) if self.decode_times else None

    def _wanted(self, decode_s: float) -> float:
        """The prompt's share of a step that keeps the gap: (gap_factor - 1) decode steps."""
        assert self.gap_factor is not None
        return (self.gap_factor - 1.0) * decode_s

    def _gap_unreachable(self, line: CostLine, wanted: float) -> bool:
        return line.fixed_s + line.per_token_s * self.min_chunk >= wanted

    def _target(self, line: CostLine, wanted: float) -> tuple[float, float]:
        """The chunk the cost line asks for, and how far one step may grow towards it."""
        if self._gap_unreachable(line, wanted):
            # no chunk keeps the gap: as few steps as possible, each at most twice its least
            return line.tokens_for(2 * line.fixed_s), math.inf
        return line.tokens_for(wanted), MAX_RESIZE

    def cost_line(self) -> CostLine | None:
        """The prompt's share of a step as a line fitted to the chunk sizes seen; None until
        two sizes at least twice apart were measured, and while they fit no rising line."""
        points = self.costs.points()
        sizes = [n for n, _ in points]
        if len(points) < 2 or max(sizes) < 2 * min(sizes):
            return None
        mean_n = sum(sizes) / len(points)
        mean_s = sum(s for _, s in points) / len(points)
        spread = sum((n - mean_n) ** 2 for n in sizes)
        slope = sum((n - mean_n) * (s - mean_s) for n, s in points) / spread
        if slope <= 0:  # tokens never cost nothing: an odd slow step, not a line to follow
            return None
        return CostLine(max(mean_s - slope * mean_n, 0.0), slope)

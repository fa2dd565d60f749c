"""What prompt lookup would have had accepted while an "auto" row decoded plainly.

An auto row that drafts by prompt lookup learns its acceptance only from the rounds it verifies,
and it stops verifying once its acceptance looks too low for a round's cost. A reply that then
starts repeating itself (a list, code being rewritten, a model's loop) was never tried again:
on the H200 an auto row that had one rejected round at a reply's start decoded the remaining
40 tokens plainly while prompt lookup, drafting every round, was accepted almost always
(auto 1.0x plain, lookup 1.7x). A lookup draft costs no forward, so while the row decodes
plainly the policy drafts anyway, keeps the draft aside, and scores it against the tokens the
row then produces: the prefix that matches is what a verify round would have accepted (at any
temperature: the target samples the draft's token with the probability a round accepts it).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SHADOW_TOKENS = 4  # a typical round's draft: scored within a few plain steps
# history tokens a step's new lookups may scan: a lookup over 4,096 tokens took 0.2-0.25 ms on
# the 2-core CPU (0.01 ms over 200), so about 0.4 ms a step at most, whatever the batch
DEFAULT_SHADOW_BUDGET = 8192


@dataclass(frozen=True)
class ShadowDraft:
    """A lookup draft made when the row had generated `start` tokens, not verified."""

    start: int
    tokens: tuple[int, ...]

    def score(self, generated: list[int]) -> int | None:
        """How many of its tokens a round would have accepted, once the row's tokens since
        `start` tell (a mismatch, or all of them produced); None while they do not yet."""
        produced = generated[self.start : self.start + len(self.tokens)]
        for i, token in enumerate(produced):
            if token != self.tokens[i]:
                return i
        return len(produced) if len(produced) == len(self.tokens) else None

"""What a verify round tells its drafters: the kind of drafter behind each row's token run, and
the drafts and accepted counts that drafters proposing for themselves learn from. Serial rounds
(engine/core/executor.py) and rounds ahead (engine/core/lookahead.py) report the same way."""

from __future__ import annotations

from engine.speculative.drafter import Drafter, VerifyFeedback, proposes_for_itself


def drafter_kind(drafters: dict[str, Drafter], name: str | None) -> str | None:
    """The kind a token run names for the drafter `name` (its own name when it has none)."""
    drafter = drafters.get(name) if name is not None else None
    return (drafter.kind or drafter.name) if drafter is not None else name


class DrafterFeedback:
    """One round's verify outcomes gathered per drafter, then handed to those that learn."""

    def __init__(self, drafters: dict[str, Drafter]) -> None:
        self.drafters = drafters
        self.items: dict[str, list[VerifyFeedback]] = {}

    def add(
        self, name: str | None, request_id: str, draft: list[int], accepted: int, tokens: list[int]
    ) -> None:
        """Row `request_id` kept `accepted` tokens of `draft` from drafter `name`; `tokens` is
        what it kept (the accepted draft and the target's own next token)."""
        if name is not None and draft:
            self.items.setdefault(name, []).append(
                VerifyFeedback(request_id, draft, accepted, tokens)
            )

    def teach(self) -> None:
        for name, items in self.items.items():
            drafter = self.drafters.get(name)
            if drafter is not None and proposes_for_itself(drafter):
                drafter.learn(items)

"""Recording one verify round in a row's speculation stats (vLLM's SpecDecodingStats terms)."""

from __future__ import annotations

from engine.requests import SpecStats


def record_round(
    spec: SpecStats,
    draft: list[int],
    accepted: int,
    *,
    draft_s: float,
    verify_s: float,
    sample_s: float,
) -> None:
    spec.target_forwards += 1
    spec.draft_time_s += draft_s
    spec.verify_time_s += verify_s
    spec.sample_time_s += sample_s
    if not draft:
        return
    spec.rounds += 1
    spec.draft_tokens += len(draft)
    spec.accepted_tokens += accepted
    for pos in range(len(draft)):
        if len(spec.drafted_by_position) <= pos:
            spec.drafted_by_position.append(0)
            spec.accepted_by_position.append(0)
        spec.drafted_by_position[pos] += 1
        spec.accepted_by_position[pos] += pos < accepted

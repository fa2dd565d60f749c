"""`python -m engine.bench --workload long-prompt` takes its ratios within each of its turns and
reports their medians (the issue's targets are medians of alternated runs), on a tiny model."""

import asyncio

from engine.bench import long_prompt
from engine.requests import SpecMethod, SpeculativeParams


def _measure(**options) -> dict:
    """The benchmark on a tiny random model: a 128-token prompt beside two chats."""
    return asyncio.run(
        long_prompt.measure(
            "random:tiny",
            long_tokens=128,
            running=2,
            prefill_chunk=None,
            settle_tokens=3,
            gap_factor=3.0,
            **options,
        )
    )


def test_each_turn_gives_its_own_ratios_and_the_medians_are_reported():
    row = _measure(repeats=3)
    assert row["repeats"] == 3
    assert len(row["ttft_ratio_runs"]) == len(row["gap_ratio_runs"]) == 3
    assert row["ttft_ratio"] == sorted(row["ttft_ratio_runs"])[1]
    assert row["gap_ratio"] == sorted(row["gap_ratio_runs"])[1]
    assert row["long_prompt_ttft_alone_s"] > 0 and row["long_prompt_ttft_beside_chats_s"] > 0
    assert row["prompt_steps"], "the last turn's steps with prompt tokens are traced"
    assert (
        len(row["prompt_steps_runs"]) == 3 and row["prompt_steps_runs"][-1] == row["prompt_steps"]
    )
    assert all(sum(n for n, _ in steps) > 0 for steps in row["prompt_steps_runs"])
    # the long prompt joins the running batch once a turn, in a step of its own or a chunk's
    assert all(any(j >= 1 for j, _, _ in joins) for joins in row["join_steps_runs"])
    assert (
        "chat_turn_wait_max_with_long_prompt_s" in row and row["chat_turns_with_long_prompt"] >= 0
    )


def test_a_chat_turn_still_waiting_counts_its_wait_until_the_window_ends():
    """A chat's next message held behind the long prompt is a stall the gaps within replies miss."""
    replies = [[1.0, 1.1], [3.0, 3.2], []]
    submitted = [0.5, 2.0, 4.0]  # the first before the window; the last never answered in it
    assert long_prompt._turn_waits(replies, submitted, 1.5, 5.0) == [1.0, 1.0]


def test_with_a_draft_model_the_long_reply_runs_on_so_its_catch_up_is_measured():
    """Every request drafts; the long prompt's reply runs on past its first token, so the
    window whose gaps count holds its draft model's catch-up on its history."""
    row = _measure(
        repeats=1,
        speculative=SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3),
        draft_model="random:tiny",
    )
    assert row["speculative"] == "draft" and row["draft_model"] == "random:tiny"
    assert row["long_prompt_reply_tokens"] == long_prompt.DEFAULT_FOLLOW_TOKENS
    assert row["gap_ratio"] > 0 and row["ttft_ratio"] > 0
    (catch_ups,) = row["catch_up_steps_runs"]
    assert catch_ups and all(spent > 0 for spent, _ in catch_ups), "the draft's catch-up is traced"

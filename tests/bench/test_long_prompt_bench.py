"""`python -m engine.bench --workload long-prompt` takes its ratios within each of its turns and
reports their medians (the issue's targets are medians of alternated runs), on a tiny model."""

import asyncio

from engine.bench import long_prompt


def test_each_turn_gives_its_own_ratios_and_the_medians_are_reported():
    row = asyncio.run(
        long_prompt.measure(
            "random:tiny",
            long_tokens=128,
            running=2,
            prefill_chunk=None,
            settle_tokens=3,
            gap_factor=3.0,
            repeats=3,
        )
    )
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

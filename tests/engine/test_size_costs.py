"""Recent costs by size, and one-off steps priced at their size's median (engine/core/size_costs.py)."""

from __future__ import annotations

from engine.core.size_costs import DEFAULT_ONE_OFF_SAMPLES, SizeCosts


def test_sizes_are_grouped_by_power_of_two_and_priced_by_their_median_rate():
    costs = SizeCosts()
    for tokens, seconds in ((256, 0.016), (300, 0.021), (256, 0.5)):
        costs.remember(tokens, seconds)
    costs.remember(16, 0.004)
    assert set(costs.by_size) == {5, 9} and costs.count() == 4
    assert abs(costs.median(400) - 400 * 0.021 / 300) < 1e-12  # the middle rate of the three
    assert costs.median(512) is None  # 512-1023: another size


def test_a_step_far_above_its_sizes_median_is_a_one_off_once_the_size_has_history():
    costs = SizeCosts()
    costs.remember(64, 0.01)
    costs.remember(64, 0.05)
    assert costs.usual(64, 0.05) == 0.05  # two steps: too few to call either a one-off
    costs.remember(64, 0.01)
    assert DEFAULT_ONE_OFF_SAMPLES == 3
    assert costs.usual(64, 0.05) == 0.01 and costs.usual(64, 0.015) == 0.015
    assert SizeCosts(samples=2).samples == 2

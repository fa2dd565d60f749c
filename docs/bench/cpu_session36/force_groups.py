"""A pytest plugin for one check: every padded forward splits its attention by row groups (any
saving at all), and the calls that split are counted. From the repo root:
PYTHONPATH=docs/bench/cpu_session36 python -m pytest -p force_groups tests/engine"""

import atexit
import collections


def pytest_configure(config):
    from engine.cache import row_groups

    row_groups.DEFAULT_MIN_SAVED = 1
    row_groups.DEFAULT_MIN_SAVED_SHARE = 0.0
    row_groups.DEFAULT_GROUP_COST = 1
    row_groups.set_enabled(True)
    original = row_groups._taken
    counts = collections.Counter()

    def taken(k, v):
        groups = original(k, v)
        counts["split" if groups is not None else "not split"] += 1
        return groups

    row_groups._taken = taken
    atexit.register(lambda: print("attention calls over offered keys:", dict(counts)))

"""Session 30: python -m engine.bench with a count of the rows asked for a draft whose drafter had
none (written to /tmp/rb/stats.txt after each round)."""
import sys, collections
import engine.core.proposals as P
import engine.core.executor as X
stats = collections.Counter()
orig = P.propose
def wrapped(drafters, inputs, plan, histories, out, **kw):
    drafts, used = orig(drafters, inputs, plan, histories, out, **kw)
    asked = [i for i, r in enumerate(plan) if r.k]
    if asked:
        stats["calls"] += 1
        stats["rows_asked"] += len(asked)
        stats["rows_empty"] += sum(1 for i in asked if not drafts[i])
        stats["rows_total"] += len(plan)
        if not any(drafts): stats["all_empty"] += 1
        stats["k_sum"] += sum(plan[i].k for i in asked)
        open("/tmp/rb/stats.txt", "w").write(repr(dict(stats)))
    return drafts, used
X.propose = wrapped
import runpy
sys.argv = ["engine.bench"] + sys.argv[1:]
runpy.run_module("engine.bench", run_name="__main__")

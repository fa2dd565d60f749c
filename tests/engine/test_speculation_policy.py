"""The speculation policy: which drafter each row drafts with and how many tokens, each method's
plan, auto rows' acceptance (pooled, per drafter) and the prompt-lookup drafts auto scores
without verifying (engine/speculative/policy.py, shadow_lookup.py)."""

from __future__ import annotations

import pytest

from engine.core.request_state import RequestState
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from engine.sampling import RowSampler
from engine.speculative.policy import SpeculationPolicy, draft_drafter_name
from tests.engine.engine_harness import measure


def _state(method: SpecMethod, k: int = 4, max_tokens: int = 64) -> RequestState:
    request = GenerationRequest(
        prompt_tokens=[1, 2, 3],
        max_tokens=max_tokens,
        speculative=SpeculativeParams(method=method, draft_tokens=k),
    )
    return RequestState(request, [1, 2, 3], RowSampler(request.sampling), None, max_tokens)


def test_policy_plans_each_method_and_respects_the_reply_end():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    rows = [
        _state(SpecMethod.OFF),
        _state(SpecMethod.PROMPT_LOOKUP, k=3),
        _state(SpecMethod.PROMPT_LOOKUP, k=8, max_tokens=3),
    ]
    plan = policy.plan(rows)
    assert (plan[0].drafter, plan[0].k) == (None, 0)
    assert (plan[1].drafter, plan[1].k) == ("lookup", 3)
    assert plan[2].k == 2  # drafts past the reply's end are wasted
    with pytest.raises(ValueError, match="needs a draft model"):
        policy.check(SpeculativeParams(method=SpecMethod.DRAFT_MODEL))
    # a draft model unloaded while a row that asked for it runs: plain, and the row says why
    orphan = policy.plan([_state(SpecMethod.DRAFT_MODEL)])[0]
    assert (orphan.drafter, orphan.k) == (None, 0)
    assert "draft model" in orphan.note


def test_a_new_auto_row_starts_from_what_auto_rows_were_kept_lately():
    """Short replies end before a row that starts from a pessimistic prior has drafted enough
    to learn otherwise: a new row starts where its neighbours and predecessors are."""
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    first = _state(SpecMethod.AUTO)
    policy.plan([first])
    assert policy._acceptance[first.request_id].rate == pytest.approx(0.6)
    for _ in range(10):
        policy.observe(first.request_id, 4, 4)
    policy.observe("a fixed-method row", 4, 0)  # not an auto row: not counted
    second = _state(SpecMethod.AUTO)
    policy.plan([first, second])
    assert policy._acceptance[second.request_id].rate > 0.95
    for _ in range(10):
        policy.observe(second.request_id, 4, 0)
    third = _state(SpecMethod.AUTO)
    policy.plan([third])
    assert policy._acceptance[third.request_id].rate < 0.4


def test_policy_auto_uses_the_rows_own_draft_model_when_it_has_one():
    mine, other = draft_drafter_name("/models/mine"), draft_drafter_name("/models/other")
    with_draft, without = _state(SpecMethod.AUTO), _state(SpecMethod.AUTO)
    with_draft.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine, other}))
    first, second = policy.plan([with_draft, without])
    assert first.k == 0 or first.drafter == mine
    assert second.k == 0 or second.drafter == "lookup"  # another row's draft is not its own
    assert SpeculationPolicy(drafters=frozenset({"lookup"})).plan([with_draft])[0].drafter in (
        "lookup",
        None,
    )  # its draft model was unloaded: prompt lookup


def test_policy_auto_lets_a_strong_lookup_match_draft_before_a_model_drafter():
    mine = draft_drafter_name("/models/mine")
    with_draft, without = _state(SpecMethod.AUTO), _state(SpecMethod.AUTO)
    with_draft.draft = mine
    fixed = _state(SpecMethod.DRAFT_MODEL)
    fixed.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine}))
    first, second, third = policy.plan([with_draft, without, fixed])
    assert first.drafter == mine and first.lookup_first  # auto: lookup first, then the draft
    assert not second.lookup_first  # already drafting by lookup
    assert not third.lookup_first  # "draft" asked for the draft model: only it drafts
    alone = SpeculationPolicy(drafters=frozenset({mine})).plan([with_draft])[0]
    assert not alone.lookup_first  # no lookup drafter on this engine


def test_strong_match_needs_three_tokens_of_context():
    from engine.speculative.prompt_lookup import strong_match

    tokens = [5, 6, 7, 8, 9, 1, 2, 5, 6, 7]
    assert strong_match(tokens, 2, ngram_max=4, window=100) == [8, 9]
    assert strong_match([5, 6, 8, 9, 1, 5, 6], 2, ngram_max=4, window=100) == []  # two only
    assert strong_match(tokens, 2, ngram_max=2, window=100) == []


def test_shadow_draft_scores_the_prefix_the_row_then_produced():
    from engine.speculative.shadow_lookup import ShadowDraft

    shadow = ShadowDraft(start=2, tokens=(7, 8, 9))
    assert shadow.score([1, 2]) is None  # nothing produced since
    assert shadow.score([1, 2, 7, 8]) is None  # all matching so far
    assert shadow.score([1, 2, 7, 8, 9]) == 3
    assert shadow.score([1, 2, 7, 5]) == 1  # a mismatch tells at once
    assert shadow.score([1, 2, 4]) == 0


def test_an_auto_row_decoding_plainly_learns_from_lookup_drafts_it_did_not_verify():
    """A row whose rounds were rejected stops verifying; when its reply then repeats itself,
    what prompt lookup would have drafted is scored against what it produced, and once that
    pays for a round's cost the row drafts again (on the H200 such a row decoded a whole reply
    plainly while fixed prompt lookup was accepted almost always)."""
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 1, {1: 0.003, 5: 0.008, 9: 0.0085, 17: 0.009})  # rounds ~3 steps
    row = _state(SpecMethod.AUTO, max_tokens=200)
    policy.plan([row])
    for _ in range(5):
        policy.observe(row.request_id, 4, 0)  # its first rounds were all rejected
    loop = [11, 12, 13, 14, 15]
    chosen = []
    for step in range(30):
        chosen.append(policy.plan([row])[0].k)
        row.generated.append(loop[step % len(loop)])  # the plain step's token
    assert chosen[:3] == [0, 0, 0]
    assert max(chosen) > 0, chosen
    first = chosen.index(max(chosen))
    assert first < 20  # within a few of its drafts' outcomes


def test_shadow_lookups_lower_the_rate_of_a_row_lookup_would_not_serve():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 1, {w: 0.003 * w for w in range(1, 18)})  # rounds never pay
    row = _state(SpecMethod.AUTO, max_tokens=200)
    policy.plan([row])
    before = policy._acceptance[row.request_id].rate
    tokens = [1, 2, 3, 1, 4, 2, 5, 3, 6, 1, 7, 2, 8, 3, 9]  # never follows its own history
    for token in tokens:
        policy.plan([row])
        row.generated.append(token)
    assert policy._acceptance[row.request_id].rate < before
    policy.forget(row.request_id)
    assert row.request_id not in policy._shadows


def test_shadow_lookups_are_for_auto_rows_whose_round_does_not_draft_by_lookup():
    mine = draft_drafter_name("/models/mine")
    with_draft, fixed = _state(SpecMethod.AUTO, max_tokens=200), _state(SpecMethod.PROMPT_LOOKUP)
    with_draft.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine}))
    measure(policy.costs, 1, {w: 0.003 * w for w in range(1, 18)})  # rounds never pay
    with_draft.generated += [1, 2, 3]
    fixed.generated += [1, 2, 3]
    policy.plan([fixed])
    assert not policy._shadows  # a fixed method verifies its own drafts anyway
    assert policy.plan([with_draft])[0].k == 0
    assert set(policy._shadows) == {with_draft.request_id}  # plain: lookup drafts aside


def test_an_auto_row_with_a_model_drafter_drafts_by_lookup_where_lookup_is_kept_more():
    """Rewrite prompts: the trained head's drafts are kept less often than prompt lookup's; an
    auto row switches to lookup while lookup's acceptance for it is the higher, and back."""
    mine = draft_drafter_name("/models/mine")
    row = _state(SpecMethod.AUTO, max_tokens=200)
    row.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine}))
    measure(policy.costs, 1, {w: 0.010 * (1 + 0.05 * (w - 1)) for w in range(1, 18)})
    first = policy.plan([row])[0]
    assert first.drafter == mine and first.lookup_first
    for _ in range(6):
        policy.observe(row.request_id, 4, 0, drafter=mine)  # the model's drafts: rejected
        policy.observe(row.request_id, 4, 4, drafter="lookup")  # a strong match: kept
    choice = policy.plan([row])[0]
    assert choice.drafter == "lookup" and choice.k >= 4 and not choice.lookup_first
    assert policy._acceptance[row.request_id].rate < 0.2  # the model's own count is apart
    for _ in range(8):
        policy.observe(row.request_id, 4, 0, drafter="lookup")
        policy.observe(row.request_id, 4, 4, drafter=mine)
    assert policy.plan([row])[0].drafter == mine
    policy.forget(row.request_id)
    assert row.request_id not in policy._lookup_acceptance


def test_shadow_lookups_scan_a_bounded_history_per_step_and_take_rows_in_turn():
    from engine.speculative.shadow_lookup import DEFAULT_SHADOW_BUDGET

    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 6, {w: 0.003 * w for w in range(1, 18)})  # rounds never pay
    rows = [_state(SpecMethod.AUTO, max_tokens=9000) for _ in range(6)]
    for row in rows:
        row.generated += [7, 8, 9] * 1400  # long, and lookup always matches
    policy.plan(rows)
    per_step = -(-DEFAULT_SHADOW_BUDGET // 4096)
    assert len(policy._shadows) == per_step
    policy.plan(rows)  # theirs are unresolved: the next rows get one
    assert len(policy._shadows) == 2 * per_step

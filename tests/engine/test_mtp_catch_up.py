"""An MTP (or trained draft head) row that joins with a long history feeds its pairs a share per
round while other rows wait, not all at once (engine/speculative/catch_up_pacer.py): it drafts
once caught up, exactly what one MTP forward over its whole handed history drafts, and the rows
already drafting go on drafting meanwhile."""

from __future__ import annotations

import random

import mlx.core as mx
import pytest
from mlx_lm.models.cache import KVCache

from engine.hidden import attach, embedding, lm_head, split_forward
from engine.models import load_model
from engine.requests import SpecMethod, SpeculativeParams
from engine.speculative.catch_up_pacer import DEFAULT_MIN_CATCH_UP
from engine.speculative.drafter import DraftRow
from engine.speculative.mtp.loading import mtp_drafter_for
from tests.mtp_models import make_mtp_folder

pytestmark = pytest.mark.timeout(120)


def test_a_long_history_is_fed_in_paced_rounds_then_drafts_as_a_fresh_forward(tmp_path):
    target = load_model(str(make_mtp_folder("qwen3_5", tmp_path / "m")))
    assert attach(target.model) is None
    drafter, note = mtp_drafter_for(target)
    assert note is None
    embed, head = embedding(target.model), lm_head(target.model)
    layer = drafter.mtp
    rng = random.Random(7)

    def hidden_of(history: list[int]) -> mx.array:
        return split_forward(target.model, mx.array([history[:-1]]), None)[0][0]

    def fresh(history: list[int], k: int) -> list[int]:
        cache = KVCache()
        out, chain = layer(embed(mx.array([history[1:]])), hidden_of(history)[None], cache)
        token = mx.argmax(head(out[:, -1]), axis=-1)
        drafts = [token]
        for _ in range(k - 1):
            out, chain = layer(embed(token[None]), chain[:, -1:], cache)
            token = mx.argmax(head(out[:, -1]), axis=-1)
            drafts.append(token)
        return mx.concatenate(drafts).tolist()

    params = SpeculativeParams(method=SpecMethod.MTP)
    histories = {"chat": [rng.randrange(20, 1000) for _ in range(6)]}
    histories["long"] = [rng.randrange(20, 1000) for _ in range(70)]
    handed = {"chat": 0, "long": 0}
    widths: list[int] = []

    class Recording:
        """The MTP layer, recording the width of each forward fed for one row alone."""

        def __getattr__(self, name):
            return getattr(layer, name)

        def __call__(self, x, hidden, cache):
            if x.shape[0] == 1 and x.shape[1] > 1:
                widths.append(x.shape[1])
            return layer(x, hidden, cache)

    drafter.mtp = Recording()
    drafts_of_long: list[int] = []
    for round_no in range(8):
        drafter.pace(0.01 if round_no else None)  # the chat runs alone in the first round
        drafter.pacer.chunk = DEFAULT_MIN_CATCH_UP  # the least share, whatever this CPU's speed
        asked = ["chat"] if round_no == 0 else ["chat", "long"]
        rows = []
        for rid in asked:
            history = histories[rid]
            hidden = hidden_of(history)[handed[rid] :]
            rows.append(DraftRow(rid, history[:2], history[2:], 3, params, hidden, handed[rid]))
        got = dict(zip(asked, drafter.propose(rows)))
        assert got["chat"] == fresh(histories["chat"], 3), round_no
        if got.get("long"):
            drafts_of_long = got["long"]
            assert drafts_of_long == fresh(histories["long"], 3), round_no
            break
        for rid in asked:
            handed[rid] = len(histories[rid]) - 1
            histories[rid] = histories[rid] + [rng.randrange(20, 1000)]
    assert drafts_of_long, "the long row joined and drafted"
    long_widths = [w for w in widths if w > 6]  # the chat's first feed is its 5 pairs
    assert long_widths[:4] == [DEFAULT_MIN_CATCH_UP] * 4, widths
    assert drafter.catch_up_s() > 0

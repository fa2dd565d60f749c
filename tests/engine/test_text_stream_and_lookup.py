"""Unit tests without a model: TextStream (stop strings, held-back text) with a fake
detokenizer, and the prompt-lookup n-gram search."""

from __future__ import annotations

from engine.speculative.prompt_lookup import lookup
from engine.text_stream import TextStream

# -- 10. TextStream with a fake detokenizer --------------------------------------------------


class FakeDetokenizer:
    """Token i is pieces[i]; tokens in `hold` wait for the next token (a partial character)."""

    def __init__(self, pieces: list[str], hold: tuple[int, ...] = ()) -> None:
        self.pieces = pieces
        self.hold = set(hold)
        self.text = ""
        self.pending = ""
        self.added = 0
        self.finalized = False

    def add_token(self, token: int) -> None:
        self.added += 1
        self.pending += self.pieces[token]
        if token not in self.hold:
            self.text += self.pending
            self.pending = ""

    def finalize(self) -> None:
        self.text += self.pending
        self.pending = ""
        self.finalized = True


def feed(pieces, stop=(), hold=()):
    stream = TextStream(FakeDetokenizer(pieces, hold), stop=tuple(stop))
    return stream, [stream.add(i) for i in range(len(pieces))]


def test_text_stream_without_stops_passes_text_through():
    stream, deltas = feed(["Hel", "lo", " wor", "ld"])
    assert deltas == ["Hel", "lo", " wor", "ld"]
    assert stream.finish() == "" and stream.detokenizer.finalized
    assert stream.text == "Hello world" and not stream.stopped


def test_text_stream_holds_a_partial_stop_and_releases_it():
    stream, deltas = feed(["Hello", " <", "/", "b>", " end"], stop=("</s>",))
    assert deltas == ["Hello", " ", "", "</b>", " end"]
    assert not stream.stopped
    assert stream.finish() == ""
    assert stream.text == "Hello </b> end"


def test_text_stream_releases_a_held_prefix_when_the_reply_ends():
    stream, deltas = feed(["Hi", " <", "/"], stop=("</s>",))
    assert deltas == ["Hi", " ", ""]
    assert stream.finish() == "</"
    assert stream.text == "Hi </" and not stream.stopped


def test_text_stream_stops_across_tokens_and_ignores_later_tokens():
    stream, deltas = feed(["Hi", " <", "/s", ">", " more"], stop=("</s>",))
    assert deltas == ["Hi", " ", "", "", ""]
    assert stream.stopped and stream.text == "Hi "
    assert stream.detokenizer.added == 4  # nothing is detokenized after the stop
    assert stream.finish() == "" and not stream.detokenizer.finalized
    assert stream.text == "Hi "


def test_text_stream_stop_inside_one_token_and_earliest_stop_wins():
    stream, deltas = feed(["ab</s>cd"], stop=("</s>",))
    assert deltas == ["ab"] and stream.stopped and stream.text == "ab"
    stream, deltas = feed(["x", "abcd"], stop=("cd", "b"))
    assert deltas == ["x", "a"] and stream.text == "xa"


def test_text_stream_overlapping_stop_prefixes():
    # "aaa" ends with "aa", a prefix of "aab": only the first "a" is safe
    stream, deltas = feed(["a", "a", "a", "b"], stop=("aab",))
    assert deltas == ["", "", "a", ""]
    assert stream.stopped and stream.text == "a"


def test_text_stream_with_a_detokenizer_that_holds_partial_characters():
    # token 1 is half a character: the detokenizer shows it together with token 2
    stream, deltas = feed(["x", "\u4f60", "\u597d", "!"], stop=("好!",), hold=(1,))
    assert deltas == ["x", "", "你", ""]
    assert stream.stopped and stream.text == "x你"
    assert stream.finish() == ""


# -- 10. prompt lookup -----------------------------------------------------------------------


def find(tokens, k=2, ngram_min=1, ngram_max=3, window=4096):
    return lookup(tokens, k, ngram_min=ngram_min, ngram_max=ngram_max, window=window)


def test_lookup_prefers_the_longest_ngram():
    # [1, 2, 3] occurred at the start; the shorter [2, 3] more recently (followed by 7, 8)
    tokens = [1, 2, 3, 9, 5, 2, 3, 7, 8, 1, 2, 3]
    assert find(tokens) == [9, 5]
    assert find(tokens, ngram_max=2) == [7, 8]  # the 3-gram is not looked at
    assert find(tokens, ngram_max=1) == [7, 8]  # the most recent 3


def test_lookup_takes_the_most_recent_occurrence():
    tokens = [4, 5, 1, 8, 4, 5, 2, 6, 9, 4, 5]  # [4, 5] twice before the end
    assert find(tokens) == [2, 6]
    assert find(tokens, k=3) == [2, 6, 9]
    assert find(tokens, k=1) == [2]


def test_lookup_respects_k_ngram_min_and_the_window():
    tokens = [7, 1, 2, 3, 4, 5, 6, 7]
    assert find(tokens, k=4) == [1, 2, 3, 4]
    assert find(tokens, k=0) == []
    assert find(tokens, ngram_min=2) == []  # only a 1-gram ([7]) matches
    assert find(tokens, window=5) == []  # the earlier 7 is outside the window
    # a continuation shorter than k (it runs into the end) is still proposed
    assert find([3, 8, 9, 3], k=5) == [8, 9, 3]
    # a full continuation from an older occurrence beats a short one from a newer one
    assert find([3, 1, 2, 9, 3, 3], k=2, ngram_max=1) == [1, 2]


def test_lookup_returns_nothing_without_a_match():
    assert find([1, 2, 3, 4]) == []
    assert find([5]) == []
    assert find([]) == []

"""The draft head's training data: the prompt generator is reproducible and its held-out prompts
share no (topic, task) pair with the training prompts; the draft vocabulary keeps end-of-turn."""

from engine.train_draft.distill import Sample
from engine.train_draft.prompts import STYLES, TASKS, TOPICS, make_prompts
from engine.train_draft.train import draft_vocabulary


def _pair(prompt: str) -> tuple[str, str]:
    for style in sorted(set(STYLES) - {""}, key=len, reverse=True):
        prompt = prompt.removesuffix(style)
    for task in TASKS:
        head, _, tail = task.partition("{t}")
        if prompt.startswith(head) and prompt.endswith(tail):
            topic = prompt[len(head) : len(prompt) - len(tail)]
            if topic in TOPICS:
                return topic, task
    raise AssertionError(prompt)


def test_prompts_are_reproducible_and_held_out_pairs_are_unseen():
    a, b = make_prompts(500, 50, seed=7), make_prompts(500, 50, seed=7)
    assert a == b and make_prompts(500, 50, seed=8) != a
    assert len(set(a.train)) == 500 and len(set(a.heldout)) == 50
    assert not {_pair(p) for p in a.train} & {_pair(p) for p in a.heldout}


def test_draft_vocabulary_is_the_most_frequent_tokens_with_eos():
    samples = [Sample([1, 2, 2], [3, 3, 3, 9], 0.0), Sample([2], [3, 4], 0.7)]
    assert draft_vocabulary(samples, 3, eos_ids=[99]) == [2, 3, 99]


def test_no_prompt_is_one_of_the_benchmarks_chat_prompts(monkeypatch):
    from engine.bench import workloads
    from engine.train_draft import prompts as prompt_module

    every = make_prompts(8000, 128)
    assert not (set(every.train) | set(every.heldout)) & set(workloads.CHAT_QUESTIONS)
    # a benchmark prompt the templates can make is left out, not trained on
    made = make_prompts(50, 10).train[0]
    monkeypatch.setattr(prompt_module, "CHAT_QUESTIONS", [made])
    again = make_prompts(50, 10)
    assert made not in again.train and made not in again.heldout

"""The draft head's training data: the prompt generator is reproducible, mixes its families, and
its held-out prompts share no (family, subject, task) key and no text with the training prompts;
the draft vocabulary keeps end-of-turn; generated data survives a save and a load."""

from collections import Counter

import pytest

from engine.train_draft.distill import Sample, load_samples, save_samples
from engine.train_draft.prompts import Family, families, make_prompts, subjects
from engine.train_draft.train import draft_vocabulary


def test_prompts_are_reproducible_and_held_out_keys_are_unseen():
    a, b = make_prompts(500, 50, seed=7), make_prompts(500, 50, seed=7)
    assert a == b and make_prompts(500, 50, seed=8) != a
    assert len(set(a.train)) == 500 and len(set(a.heldout)) == 50
    assert len(a.train_keys) == 500 and len(a.heldout_keys) == 50
    assert not set(a.train_keys) & set(a.heldout_keys)
    assert not set(a.train) & set(a.heldout)


def test_every_family_is_drawn_about_at_its_weight():
    made = make_prompts(8000, 128)
    counts = Counter(family for family, _, _ in made.train_keys)
    total = sum(f.weight for f in families())
    for family in families():
        assert counts[family.name] / 8000 == pytest.approx(family.weight / total, abs=0.03)


def test_each_prompt_is_its_family_template_filled_with_its_subject():
    made = make_prompts(2000, 64)
    by_name = {f.name: f for f in families()}
    for prompt, (name, subject, task) in zip(made.train, made.train_keys):
        family = by_name[name]
        assert subject in family.subjects and task in family.tasks
        assert prompt.startswith(family.prompt(subject, task))
    assert Family("pair", (), (), 1).prompt("tea | coffee", "Compare {a} and {b}.") == (
        "Compare tea and coffee."
    )


def test_subject_files_have_no_comments_blanks_or_repeats():
    for name in ("topics", "activities", "facts", "people", "places", "pairs"):
        names = subjects(name)
        assert len(names) > 50 and all(s and not s.startswith("#") for s in names)
    assert all(len(pair.split("|")) == 2 for pair in subjects("pairs"))


def test_too_many_prompts_is_a_clear_error():
    with pytest.raises(ValueError, match="the generator makes"):
        make_prompts(10**7, 10)


def test_draft_vocabulary_is_the_most_frequent_tokens_with_eos():
    samples = [Sample([1, 2, 2], [3, 3, 3, 9], 0.0), Sample([2], [3, 4], 0.7)]
    assert draft_vocabulary(samples, 3, eos_ids=[99]) == [2, 3, 99]


def test_samples_survive_a_save_and_a_load(tmp_path):
    samples = [Sample([1, 2, 2], [3, 3, 3, 9], 0.0), Sample([2], [], 0.7), Sample([5], [6], 0.7)]
    path = tmp_path / "data.npz"
    save_samples(path, samples)
    assert load_samples(path) == samples


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

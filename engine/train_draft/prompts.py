"""Chat prompts for self-distillation, made here from a seeded mix of subjects, tasks and styles
(nothing is downloaded). Six families of prompts, each with its own subjects
(`engine/train_draft/subjects/*.txt`) and task templates: general topics, how-to activities,
people, places, comparisons of two things, and whole short-answer questions. The held-out set is
drawn from (family, subject, task) keys the training set never uses, so held-out numbers measure
prompts the head has not seen; no prompt is one of the benchmark's chat prompts, and the subjects
added since the second head leave out the benchmark's own subjects."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from engine.bench.workloads import CHAT_QUESTIONS

TASKS = [
    "Explain {t} in simple terms.",
    "Give me three interesting facts about {t}.",
    "Write a short poem about {t}.",
    "What are the pros and cons of {t}?",
    "Summarize the history of {t} in a few sentences.",
    "Write a short story that involves {t}.",
    "What should a beginner know about {t}?",
    "List five questions a student might ask about {t}.",
    "Describe {t} to someone who has never heard of it.",
    "Write a tweet about {t}.",
    "What are common misconceptions about {t}?",
    "Compare {t} with something from everyday life.",
    "Give me a step-by-step guide related to {t}.",
    "Why does {t} matter today?",
    "Write a short dialogue between two friends about {t}.",
    "Create a quiz with three questions about {t}.",
    "Write an email to a colleague about {t}.",
    "What is the most surprising thing about {t}?",
    "Write a limerick about {t}.",
    "Give me a one-paragraph essay on {t}.",
    "How would you teach {t} to a ten-year-old?",
    "Write a product description inspired by {t}.",
    "What are some tips related to {t}?",
    "Tell me a joke about {t}.",
    "Outline a presentation about {t}.",
    # everyday questions with short answers, as chats mostly are
    "What is {t}?",
    "How does {t} work?",
    "Why is {t} important?",
    "Tell me a fun fact about {t}.",
    "Give me three tips about {t}.",
    "Explain {t} in two sentences.",
    "Write a haiku about {t}.",
    "What are the main parts of {t}?",
    "Who should care about {t}, and why?",
    "Suggest a name for a club about {t}.",
    "List five words related to {t}.",
    "How can I learn more about {t}?",
    "What is one question about {t} that people often ask?",
    "Write a two-line poem about {t}.",
    "Recommend a good habit related to {t}.",
    "What is the history of {t} in one sentence?",
]

ACTIVITY_TASKS = [
    "How do I {t}?",
    "How can I {t}?",
    "What is the easiest way to {t}?",
    "Give me step-by-step instructions to {t}.",
    "What do I need to {t}?",
    "What mistakes should I avoid when I {t}?",
    "I want to {t}. Where do I start?",
    "Give me three tips to {t}.",
    "How long does it take to {t}?",
    "Explain how to {t} in simple terms.",
]

PERSON_TASKS = [
    "Who was {t}?",
    "What is {t} famous for?",
    "Write a short biography of {t}.",
    "Tell me a fun fact about {t}.",
    "What can we learn from {t}?",
    "Describe the life of {t} in three sentences.",
    "Why is {t} important?",
    "Write a short poem about {t}.",
]

PLACE_TASKS = [
    "What is {t} known for?",
    "Tell me about {t}.",
    "Plan a three-day trip to {t}.",
    "What is the weather like in {t}?",
    "What should I see in {t}?",
    "Give me three fun facts about {t}.",
    "Describe {t} in a few sentences.",
    "What food is {t} famous for?",
]

PAIR_TASKS = [
    "What is the difference between {a} and {b}?",
    "Compare {a} and {b}.",
    "Which is better, {a} or {b}?",
    "What do {a} and {b} have in common?",
    "Explain the difference between {a} and {b} in two sentences.",
]

STYLES = [
    "",
    "",
    "",
    " Keep it brief.",
    " Use bullet points.",
    " Be friendly and casual.",
    " Answer in a formal tone.",
    " Use an example.",
    " Keep it under 100 words.",
    " Make it fun.",
    " Explain it like a teacher.",
    " Be precise.",
]

DEFAULT_SEED = 1234


@dataclass(frozen=True)
class Family:
    """One kind of prompt: its subjects, its task templates and its share of the prompts."""

    name: str
    subjects: tuple[str, ...]
    tasks: tuple[str, ...]
    weight: float

    def prompt(self, subject: str, task: str) -> str:
        if "{a}" in task:
            a, b = (part.strip() for part in subject.split("|"))
            return task.format(a=a, b=b)
        # "Martin Luther King Jr." ends a sentence once
        return task.format(t=subject).replace("..", ".")


@dataclass(frozen=True)
class PromptSets:
    """Training prompts and held-out prompts (never trained on), each with its key."""

    train: list[str]
    heldout: list[str]
    # (family, subject, task) of each prompt, in the same order
    train_keys: list[tuple[str, str, str]] = field(default_factory=list)
    heldout_keys: list[tuple[str, str, str]] = field(default_factory=list)


@cache
def subjects(name: str) -> tuple[str, ...]:
    """The subjects in subjects/<name>.txt (one per line; # starts a comment line)."""
    text = resources.files("engine.train_draft").joinpath("subjects", f"{name}.txt").read_text()
    lines = (line.strip() for line in text.splitlines())
    return tuple(dict.fromkeys(line for line in lines if line and not line.startswith("#")))


def families() -> list[Family]:
    """Every family, with its weight in the mix."""
    return [
        Family("topic", subjects("topics"), tuple(TASKS), 0.42),
        Family("activity", subjects("activities"), tuple(ACTIVITY_TASKS), 0.16),
        Family("fact", subjects("facts"), ("{t}",), 0.10),
        Family("person", subjects("people"), tuple(PERSON_TASKS), 0.09),
        Family("place", subjects("places"), tuple(PLACE_TASKS), 0.09),
        Family("pair", subjects("pairs"), tuple(PAIR_TASKS), 0.08),
    ]


def make_prompts(n_train: int, n_heldout: int, *, seed: int = DEFAULT_SEED) -> PromptSets:
    """`n_train` and `n_heldout` distinct prompts; the same seed gives the same lists."""
    rng = random.Random(seed)
    train_keys: dict[str, list[tuple[str, str]]] = {}
    held_keys: dict[str, list[tuple[str, str]]] = {}
    every = families()
    for family in every:
        pairs = [(subject, task) for subject in family.subjects for task in family.tasks]
        rng.shuffle(pairs)
        n_held = max(1, len(pairs) // 20)
        held_keys[family.name], train_keys[family.name] = pairs[:n_held], pairs[n_held:]
    taken: set[str] = set()
    train, train_k = _draw(rng, every, train_keys, n_train, taken)
    heldout, heldout_k = _draw(rng, every, held_keys, n_heldout, taken)
    return PromptSets(train, heldout, train_k, heldout_k)


def _draw(
    rng: random.Random,
    every: list[Family],
    keys: dict[str, list[tuple[str, str]]],
    n: int,
    taken: set[str],
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """n prompts from the families' pools at their weights, none in `taken` (which grows)."""
    # the benchmark's chat prompts measure the head on prompts it never saw
    taken.update(CHAT_QUESTIONS)
    pools = {}
    for family in every:
        combos = [
            (family.prompt(subject, task) + style, (family.name, subject, task))
            for subject, task in keys[family.name]
            for style in dict.fromkeys(STYLES)
        ]
        rng.shuffle(combos)
        pools[family.name] = [c for c in combos if c[0] not in taken]
    available = sum(len(pool) for pool in pools.values())
    if n > available:
        raise ValueError(f"asked for {n} prompts; the generator makes {available} here")
    by_name = {family.name: family for family in every}
    prompts: list[str] = []
    prompt_keys: list[tuple[str, str, str]] = []
    while len(prompts) < n:
        names = [name for name, pool in pools.items() if pool]
        if not names:
            raise ValueError(f"asked for {n} prompts; the generator makes {len(prompts)} here")
        name = rng.choices(names, weights=[by_name[m].weight for m in names])[0]
        prompt, key = pools[name].pop()
        if prompt in taken:  # two families can make one text ("What is gravity?")
            continue
        taken.add(prompt)
        prompts.append(prompt)
        prompt_keys.append(key)
    return prompts, prompt_keys


def messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]

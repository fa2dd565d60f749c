"""Chat prompts for self-distillation, made here from a seeded mix of topics, tasks and styles
(nothing is downloaded). The held-out set is drawn from (topic, task) pairs the training set
never uses, so held-out numbers measure prompts the head has not seen; no prompt is one of the
benchmark's chat prompts."""

from __future__ import annotations

import random
from dataclasses import dataclass

from engine.bench.workloads import CHAT_QUESTIONS

TOPICS = [
    "the French Revolution",
    "black holes",
    "sourdough bread",
    "the immune system",
    "electric cars",
    "the stock market",
    "honeybees",
    "the Roman Empire",
    "volcanoes",
    "climate change",
    "the human heart",
    "jazz music",
    "chess openings",
    "the moon landing",
    "rainforests",
    "quantum computing",
    "coffee",
    "the printing press",
    "sleep",
    "glaciers",
    "the internet",
    "vitamins",
    "ancient Egypt",
    "solar panels",
    "dinosaurs",
    "meditation",
    "the water cycle",
    "democracy",
    "penguins",
    "the periodic table",
    "marathon training",
    "the Renaissance",
    "earthquakes",
    "recycling",
    "dogs",
    "the Great Wall of China",
    "photography",
    "budgeting",
    "tea ceremonies",
    "Mars",
    "bicycles",
    "the ocean tides",
    "gardening tomatoes",
    "the Olympic Games",
    "electricity",
    "friendship",
    "time management",
    "public speaking",
    "the Amazon river",
    "origami",
    "whales",
    "video games",
    "trains",
    "the brain",
    "mushrooms",
    "airplanes",
    "renewable energy",
    "Shakespeare",
    "the piano",
    "hiking safety",
    "spiders",
    "the Silk Road",
    "learning a language",
    "clouds",
    "pizza",
    "the Industrial Revolution",
    "rainbows",
    "cryptography",
    "soccer",
    "yoga",
    "bread yeast",
    "robots",
    "the Arctic",
    "libraries",
    "vaccination history",
    "kites",
    "lighthouses",
    "a first job interview",
    "moving to a new city",
    "composting",
    "sharks",
    "magnets",
    "the Eiffel Tower",
    "fermentation",
    "password security",
    "deserts",
    "butterflies",
    "the Milky Way",
    "email etiquette",
    "knitting",
    "a rainy weekend",
    "space stations",
    "volunteering",
    "the metric system",
    "wolves",
    "spreadsheets",
    "camping",
    "bridges",
    "Python lists",
    "SQL joins",
    "sorting algorithms",
    "git branches",
    "HTTP requests",
    "unit tests",
    "binary numbers",
    "regular expressions",
    "linked lists",
    "JSON files",
]

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
class PromptSets:
    """Training prompts and held-out prompts (never trained on)."""

    train: list[str]
    heldout: list[str]


def make_prompts(n_train: int, n_heldout: int, *, seed: int = DEFAULT_SEED) -> PromptSets:
    """`n_train` and `n_heldout` distinct prompts; the same seed gives the same lists."""
    rng = random.Random(seed)
    pairs = [(topic, task) for topic in TOPICS for task in TASKS]
    rng.shuffle(pairs)
    n_held_pairs = max(n_heldout, len(pairs) // 20)
    held_pairs, train_pairs = pairs[:n_held_pairs], pairs[n_held_pairs:]
    train = _draw(rng, train_pairs, n_train)
    heldout = _draw(rng, held_pairs, n_heldout)
    return PromptSets(train=train, heldout=heldout)


def _draw(rng: random.Random, pairs: list[tuple[str, str]], n: int) -> list[str]:
    combos = [(pair, style) for pair in pairs for style in dict.fromkeys(STYLES)]
    rng.shuffle(combos)
    # the benchmark's chat prompts measure the head on prompts it never saw
    unseen = set(CHAT_QUESTIONS)
    combos = [c for c in combos if c[0][1].format(t=c[0][0]) + c[1] not in unseen]
    if n > len(combos):
        raise ValueError(f"asked for {n} prompts; the generator makes {len(combos)} here")
    return [task.format(t=topic) + style for (topic, task), style in combos[:n]]


def messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]

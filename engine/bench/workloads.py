"""Prompt sets for the benchmark. `chat`: everyday questions; `rewrite`: answers that repeat
much of the prompt (where prompt lookup shines)."""

from __future__ import annotations

from typing import Any

CHAT_QUESTIONS = [
    "What is the capital of France?",
    "Give me three tips for sleeping better.",
    "Explain what a hash table is in two sentences.",
    "Write a haiku about autumn leaves.",
    "Why is the sky blue?",
    "What are the main differences between Python and JavaScript?",
    "Suggest a name for a small bakery.",
    "How do I boil an egg?",
    "Summarize the plot of Romeo and Juliet.",
    "What is photosynthesis?",
    "List five fruits that are rich in vitamin C.",
    "How does a bicycle stay upright?",
    "Write a short birthday message for a friend.",
    "What is the difference between weather and climate?",
    "Explain recursion to a child.",
    "Give me a simple recipe for pancakes.",
    "What causes the seasons on Earth?",
    "How do vaccines work?",
    "Describe the water cycle.",
    "What is a black hole?",
    "Recommend a good habit to start this week.",
    "How many continents are there? Name them.",
    "What does a CPU do?",
    "Tell me a fun fact about octopuses.",
    "Why do cats purr?",
    "What is the Pythagorean theorem?",
    "Write two lines of a poem about the sea.",
    "How can I save money on groceries?",
    "What is machine learning?",
    "Explain what an API is.",
    "What is the tallest mountain in the world?",
    "Give me a tongue twister.",
]

REWRITE_TEXTS = [
    (
        "Fix the spelling mistakes in this text and repeat it in full:",
        "The quick brown fox jumpd over the lazy dog. The dog was not amused, and it barkd "
        "loudly at the fox, who ran away into the forest. Later that day the fox came back "
        "with his freinds to apologise to the dog.",
    ),
    (
        "Add type hints to this Python function and return the whole function:",
        "def add_numbers(a, b):\n    result = a + b\n    print(result)\n    return result\n\n"
        "def multiply_numbers(a, b):\n    result = a * b\n    print(result)\n    return result",
    ),
    (
        "Rewrite this paragraph, changing only 'cat' to 'dog':",
        "My cat likes to sleep on the sofa. Every morning my cat wakes up early and asks for "
        "breakfast. When I come home, my cat waits at the door. I love my cat very much.",
    ),
    (
        "Correct the grammar in this text and repeat it in full:",
        "Yesterday I goes to the market and buyed some apples. The apples was very fresh and "
        "the seller were friendly. I will goes there again next week to buy more apples.",
    ),
    (
        "Rename the variable x to count in this code and show the whole code:",
        "x = 0\nfor item in items:\n    if item.valid:\n        x = x + 1\nprint(x)\n"
        "if x > 10:\n    print('many items')\nelse:\n    print('few items')",
    ),
    (
        "Repeat this list, sorted alphabetically:",
        "banana, cherry, apple, mango, kiwi, grape, lemon, orange, peach, pear, plum, fig",
    ),
    (
        "Fix the typos and repeat the email in full:",
        "Dear Sam,\n\nThank you for you message. I am happy to confirm the meting on Monday at "
        "ten oclock. Please bring the reports and the budjet. See you soon.\n\nBest regards,\nAlex",
    ),
    (
        "Convert this text to title case and repeat it:",
        "the history of the roman empire from the founding of rome to the fall of constantinople",
    ),
]

WORKLOADS = ("chat", "rewrite", "multiturn", "long-prompt")


def messages_for(workload: str, n: int) -> list[list[dict[str, str]]]:
    """n chat conversations (lists of messages) for a workload, cycling its prompt set."""
    if workload == "chat":
        items = [[{"role": "user", "content": q}] for q in CHAT_QUESTIONS]
    elif workload == "rewrite":
        items = [[{"role": "user", "content": f"{a}\n\n{b}"}] for a, b in REWRITE_TEXTS]
    else:
        raise ValueError(f"unknown workload {workload!r}; choose from {WORKLOADS}")
    return [items[i % len(items)] for i in range(n)]


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)

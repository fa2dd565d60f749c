"""Turn a request into prompt token ids: the model's chat template, or ids given directly."""

from __future__ import annotations

from typing import Any

from engine.requests import GenerationRequest

VALID_ROLES = ("system", "user", "assistant", "tool")


def build_prompt(request: GenerationRequest, tokenizer: Any, *, vocab_size: int) -> list[int]:
    """Token ids for the request; ValueError with a readable message when they cannot be made."""
    if request.prompt_tokens is not None and request.messages is not None:
        raise ValueError("give either messages or prompt tokens, not both")
    if request.prompt_tokens is not None:
        ids = [int(t) for t in request.prompt_tokens]
        bad = [t for t in ids if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(
                f"prompt token id {bad[0]} is outside the vocabulary (0..{vocab_size - 1})"
            )
    elif request.messages is not None:
        ids = apply_chat_template(
            request.messages, tokenizer, continue_reply=request.continue_reply
        )
    else:
        raise ValueError("the request has neither messages nor prompt tokens")
    if not ids:
        raise ValueError("the prompt is empty")
    return ids


def apply_chat_template(
    messages: list[dict[str, str]], tokenizer: Any, *, continue_reply: bool = False
) -> list[int]:
    """Prompt ids for a chat; with `continue_reply` the last (assistant) message is left open so
    the model extends it instead of starting a new turn."""
    if continue_reply and (not messages or messages[-1].get("role") != "assistant"):
        raise ValueError("continue_reply needs the last message to be the assistant's reply")
    for i, message in enumerate(messages):
        if message.get("role") not in VALID_ROLES:
            raise ValueError(f"message {i} has role {message.get('role')!r}; use {VALID_ROLES}")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"message {i} has no text content")
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            messages,
            add_generation_prompt=not continue_reply,
            continue_final_message=continue_reply,
            tokenize=True,
        )
        if isinstance(ids, dict):  # transformers may return a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)
    # A base model without a template: plain text, one message per paragraph.
    text = "\n\n".join(m["content"] for m in messages)
    return list(tokenizer.encode(text))

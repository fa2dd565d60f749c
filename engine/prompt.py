"""Turn a request into prompt token ids: the model's chat template, or ids given directly."""

from __future__ import annotations

from typing import Any

from engine.requests import GenerationRequest
from engine.validation import check_prompt, check_token_ids


def build_prompt(request: GenerationRequest, tokenizer: Any, *, vocab_size: int) -> list[int]:
    """Token ids for the request; ValueError with a readable message when they cannot be made."""
    check_prompt(request)
    if request.prompt_tokens is not None:
        ids = list(request.prompt_tokens)
        check_token_ids("prompt_tokens", ids, vocab_size=vocab_size)
    else:
        ids = apply_chat_template(
            request.messages, tokenizer, continue_reply=request.continue_reply
        )
    if not ids:
        raise ValueError("the prompt is empty")
    return ids


def apply_chat_template(
    messages: list[dict[str, str]], tokenizer: Any, *, continue_reply: bool = False
) -> list[int]:
    """Messages already checked by engine.validation.check_messages, as token ids; with
    `continue_reply` the last (assistant) message is left open so the model extends it
    instead of starting a new turn."""
    if continue_reply and (not messages or messages[-1].get("role") != "assistant"):
        raise ValueError("continue_reply needs the last message to be the assistant's reply")
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

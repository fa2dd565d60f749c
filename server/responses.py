"""OpenAI response bodies: completions, their streamed chunks (server-sent events) and usage."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from engine.requests import FinishReason, RequestStats

CHAT = "chat.completion"
CHAT_CHUNK = "chat.completion.chunk"
TEXT = "text_completion"
FINISH_REASONS = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length"}
SSE_DONE = b"data: [DONE]\n\n"


class ResponseShape:
    """The id, time and model every body of one response repeats, and how its choices look."""

    def __init__(self, *, chat: bool, model: str) -> None:
        self.chat = chat
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def whole(self, text: str, finish: FinishReason, stats: RequestStats, completion: int) -> dict:
        """The non-streaming answer."""
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice.update({"logprobs": None, "finish_reason": finish_reason(finish)})
        return self._body(CHAT if self.chat else TEXT, [choice], usage(stats, completion))

    def chunk(self, text: str, *, first: bool = False, finish: FinishReason | None = None) -> bytes:
        """One streamed piece of text (the first chat chunk also carries the role)."""
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if first else {}
            if text or first:
                delta["content"] = text
            choice: dict[str, Any] = {"index": 0, "delta": delta}
        else:
            choice = {"index": 0, "text": text}
        choice.update(
            {"logprobs": None, "finish_reason": None if finish is None else finish_reason(finish)}
        )
        return sse(self._body(CHAT_CHUNK if self.chat else TEXT, [choice], None))

    def usage_chunk(self, stats: RequestStats, completion: int) -> bytes:
        """stream_options.include_usage: the last chunk, with no choices."""
        return sse(self._body(CHAT_CHUNK if self.chat else TEXT, [], usage(stats, completion)))

    def _body(self, kind: str, choices: list[dict], usage_: dict | None) -> dict:
        body = {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if usage_ is not None or kind != CHAT_CHUNK:
            body["usage"] = usage_
        return body


def usage(stats: RequestStats, completion_tokens: int) -> dict[str, Any]:
    """OpenAI's usage, with the prompt tokens the prompt cache served as cached_tokens."""
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": stats.prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_tokens},
    }


def finish_reason(reason: FinishReason) -> str:
    return FINISH_REASONS.get(reason, "stop")


def sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, ensure_ascii=False).encode("utf-8") + b"\n\n"


def models_list(models: list[Any]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": m.id,
                "object": "model",
                "created": m.created,
                "owned_by": "tandem",
                "loaded": m.loaded,
            }
            for m in models
        ],
    }

"""OpenAI request bodies into engine requests: every field is checked here or by
engine/validation.py, and anything the engine cannot honour is refused rather than ignored."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.requests import (
    MAX_MAX_TOKENS,
    GenerationRequest,
    SamplingParams,
    SpeculativeParams,
)
from engine.validation import RequestError, validate_request
from server.errors import ApiError

# OpenAI's default temperature; max_tokens left out means "until the model's context is full"
# (the engine clips MAX_MAX_TOKENS to the context at admission).
DEFAULT_TEMPERATURE = 1.0
DEFAULT_MAX_TOKENS = MAX_MAX_TOKENS
SPECULATIVE_FIELDS = ("method", "draft_tokens", "ngram_min", "ngram_max", "draft_model")
EXTRA_SAMPLING_FIELDS = ("top_k", "min_p", "repetition_penalty", "repetition_context")
ROLE_ALIASES = {"developer": "system"}  # OpenAI's newer name for the system role


@dataclass
class ParsedRequest:
    """One API call: the engine request (its model still as the client named it) and how to
    answer it."""

    request: GenerationRequest
    model: str | None  # as the client named it; None or "": the server's default model
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    prompt_text: str | None = None  # /v1/completions with a text prompt: tokenized per model


def parse_chat(body: Any) -> ParsedRequest:
    """POST /v1/chat/completions."""
    body = _object(body)
    _refuse_unsupported(body)
    if "messages" not in body:
        raise ApiError("messages is required", param="messages")
    request = GenerationRequest(messages=_messages(body["messages"]))
    parsed = _common(body, request)
    _validate(parsed.request)
    return parsed


def parse_completion(body: Any) -> ParsedRequest:
    """POST /v1/completions: a text prompt (tokenized with the model's tokenizer, no chat
    template) or a list of token ids."""
    body = _object(body)
    _refuse_unsupported(body)
    if body.get("echo"):
        raise ApiError("echo is not supported by this server", param="echo")
    if body.get("suffix"):
        raise ApiError("suffix is not supported by this server", param="suffix")
    if body.get("best_of") not in (None, 1):
        raise ApiError("best_of must be 1: this server returns one completion", param="best_of")
    if "prompt" not in body:
        raise ApiError("prompt is required", param="prompt")
    prompt = body["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    text: str | None = None
    if isinstance(prompt, str):
        if not prompt:
            raise ApiError("prompt is empty: give at least one character", param="prompt")
        text = prompt
        request = GenerationRequest(prompt_tokens=[0])  # replaced once the model is known
    elif isinstance(prompt, list) and all(type(t) is int for t in prompt):
        request = GenerationRequest(prompt_tokens=list(prompt))
    else:
        raise ApiError(
            "prompt must be a string or a list of token ids (one prompt per request)",
            param="prompt",
        )
    parsed = _common(body, request)
    parsed.prompt_text = text
    _validate(parsed.request)
    return parsed


def with_model(parsed: ParsedRequest, model: str | None, prompt_tokens: list[int] | None) -> None:
    """Fill in the resolved model (and the tokenized text prompt) and check the request again."""
    parsed.request.model = model
    if prompt_tokens is not None:
        parsed.request.prompt_tokens = prompt_tokens
    _validate(parsed.request)


# -- fields ----------------------------------------------------------------------------------


def _common(body: dict[str, Any], request: GenerationRequest) -> ParsedRequest:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(f"model must be a string, got {type(model).__name__}", param="model")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError("stream must be true or false", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError("stream_options must be an object", param="stream_options")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise ApiError("stream_options.include_usage must be true or false", param="stream_options")
    max_tokens = body.get("max_completion_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    request.max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    stop = body.get("stop")
    request.stop = (stop,) if isinstance(stop, str) else (() if stop is None else stop)
    request.sampling = _sampling(body)
    request.speculative = _speculative(body.get("speculative"))
    return ParsedRequest(
        request=request, model=model or None, stream=stream, include_usage=include_usage
    )


def _sampling(body: dict[str, Any]) -> SamplingParams:
    fields: dict[str, Any] = {"temperature": DEFAULT_TEMPERATURE}
    for name in ("temperature", "top_p", "seed", *EXTRA_SAMPLING_FIELDS):
        if body.get(name) is not None:
            fields[name] = body[name]
    return SamplingParams(**fields)


def _speculative(value: Any) -> SpeculativeParams:
    """Tandem's extra field: {"method": "off"|"lookup"|"draft"|"auto", "draft_tokens": k,
    "ngram_min": a, "ngram_max": b, "draft_model": name}."""
    if value is None:
        return SpeculativeParams()
    if not isinstance(value, dict):
        raise ApiError(
            'speculative must be an object such as {"method": "lookup", "draft_tokens": 4}',
            param="speculative",
        )
    unknown = sorted(set(value) - set(SPECULATIVE_FIELDS))
    if unknown:
        raise ApiError(
            f"speculative has unknown field(s) {', '.join(unknown)}; "
            f"it takes {', '.join(SPECULATIVE_FIELDS)}",
            param="speculative",
        )
    return SpeculativeParams(**{k: v for k, v in value.items() if v is not None})


def _messages(value: Any) -> Any:
    """OpenAI messages as the engine's {"role", "content"} dicts: text content parts joined,
    "developer" read as "system"; anything else is left for engine/validation.py to name."""
    if not isinstance(value, list):
        return value
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            out.append(message)
            continue
        if message.get("tool_calls") or message.get("function_call"):
            raise ApiError(
                f"messages[{i}] holds tool calls; this server does not run tools", param="messages"
            )
        role = message.get("role")
        content = message.get("content")
        if content is None and "content" in message:
            content = ""
        out.append(
            {"role": ROLE_ALIASES.get(role, role), "content": _content(i, content)}
            if "content" in message
            else {"role": ROLE_ALIASES.get(role, role)}
        )
    return out


def _content(index: int, content: Any) -> Any:
    if not isinstance(content, list):
        return content
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ApiError(
                f"messages[{index}].content[{j}] is a {kind!r} part; this server takes text only",
                param="messages",
            )
        texts.append(part.get("text"))
    if not all(isinstance(t, str) for t in texts):
        raise ApiError(f"messages[{index}].content has a text part without text", param="messages")
    return "".join(texts)


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """Parameters the engine cannot honour: refused, never silently ignored."""
    if body.get("n") not in (None, 1):
        raise ApiError("n must be 1: this server returns one choice per request", param="n")
    for name in ("logprobs", "top_logprobs", "tools", "functions", "logit_bias"):
        if body.get(name):
            raise ApiError(f"{name} is not supported by this server", param=name)
    if body.get("tool_choice") not in (None, "none"):
        raise ApiError("tool_choice is not supported by this server", param="tool_choice")
    for name in ("presence_penalty", "frequency_penalty"):
        if body.get(name) not in (None, 0, 0.0):
            raise ApiError(
                f"{name} is not supported by this server; use repetition_penalty", param=name
            )
    response_format = body.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise ApiError(
            "response_format other than text is not supported by this server",
            param="response_format",
        )


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _validate(request: GenerationRequest) -> None:
    try:
        validate_request(dataclasses.replace(request))
    except RequestError as exc:
        raise ApiError(_openai_names(str(exc)), param=_param(str(exc))) from None


def _openai_names(message: str) -> str:
    """engine/validation.py names fields as the engine's dataclasses do; say them as the API's."""
    return message.replace("sampling.", "")


def _param(message: str) -> str | None:
    first = message.split(" ", 1)[0]
    name = first.replace("sampling.", "").split("[", 1)[0]
    return name if name.replace("_", "").replace(".", "").isalnum() else None

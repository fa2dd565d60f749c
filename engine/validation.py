"""Checks every field of a request for its type and range, so a request that cannot run is
refused with a message naming the field before it reaches the batch.

`validate_request` holds the model-independent checks; `Engine.submit` runs it on the caller's
thread. The checks that need the loaded model (`check_top_k`, `check_token_ids`) run on the
engine thread when the scheduler admits the request.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from engine.requests import (
    MAX_DRAFT_TOKENS,
    MAX_MAX_TOKENS,
    MAX_MESSAGES,
    MAX_NGRAM,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKENS,
    MAX_REPETITION_CONTEXT,
    MAX_REQUEST_ID_LENGTH,
    MAX_SEED,
    MAX_STOP_LENGTH,
    MAX_STOP_STRINGS,
    MAX_TOP_K,
    VALID_ROLES,
    ErrorEvent,
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
)

log = logging.getLogger(__name__)

DEFAULT_SHOWN_CHARS = 40  # how much of a bad value a message repeats
MAX_MODEL_SPEC_LENGTH = 4096  # a folder path or a repo id


class RequestError(ValueError):
    """A request that cannot run; the message names the bad field."""


def validate_request(request: GenerationRequest) -> None:
    """Raise RequestError for the first field of `request` that cannot work with any model."""
    if not isinstance(request, GenerationRequest):
        raise RequestError(f"the request must be a GenerationRequest, got {_kind(request)}")
    _text("request_id", request.request_id, max_length=MAX_REQUEST_ID_LENGTH, empty=False)
    check_prompt(request)
    _integer("max_tokens", request.max_tokens, 1, MAX_MAX_TOKENS)
    check_stop(request.stop)
    check_sampling(request.sampling)
    check_speculative(request.speculative)
    if not isinstance(request.continue_reply, bool):
        raise RequestError(
            f"continue_reply must be true or false, got {_show(request.continue_reply)}"
        )
    check_model_spec("model", request.model)


def refusal(request: GenerationRequest) -> ErrorEvent | None:
    """The ErrorEvent that ends a request with a bad field, or None when it may run."""
    try:
        validate_request(request)
    except RequestError as exc:
        log.info("request refused: %s", exc)
        request_id = request.request_id if isinstance(request, GenerationRequest) else ""
        return ErrorEvent(request_id if isinstance(request_id, str) else "", str(exc))
    return None


def check_prompt(request: GenerationRequest) -> None:
    """Exactly one of messages and prompt_tokens, each well formed."""
    if request.messages is not None and request.prompt_tokens is not None:
        raise RequestError("give either messages or prompt_tokens, not both")
    if request.messages is not None:
        check_messages(request.messages)
    elif request.prompt_tokens is not None:
        _token_list("prompt_tokens", request.prompt_tokens, MAX_PROMPT_TOKENS)
        if not request.prompt_tokens:
            raise RequestError("prompt_tokens is empty: the prompt needs at least one token")
    else:
        raise RequestError("the request has neither messages nor prompt_tokens")


def check_messages(messages: Any) -> None:
    """A non-empty list of {"role": one of VALID_ROLES, "content": str} dicts."""
    if not isinstance(messages, list | tuple):
        raise RequestError(
            "messages must be a list of {'role': ..., 'content': ...} dicts, "
            f"got {_kind(messages)}"
        )
    if not messages:
        raise RequestError("messages is empty: give at least one message")
    if len(messages) > MAX_MESSAGES:
        raise RequestError(f"messages holds {len(messages)} messages; the most is {MAX_MESSAGES}")
    chars = 0
    for i, message in enumerate(messages):
        name = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(
                f"{name} must be a dict with 'role' and 'content', got {_kind(message)}"
            )
        for key in ("role", "content"):
            if key not in message:
                raise RequestError(f"{name} has no {key!r}")
        role = message["role"]
        _text(f"{name}.role", role)
        if role not in VALID_ROLES:
            raise RequestError(f"{name}.role must be one of {_choices(VALID_ROLES)}, got {role!r}")
        for key, value in message.items():
            if not isinstance(key, str):
                raise RequestError(f"{name} has a key that is not a string: {_show(key)}")
            _text(f"{name}.{key}", value)  # extra keys reach the chat template: text only
            chars += len(value)
    if chars > MAX_PROMPT_CHARS:
        raise RequestError(
            f"messages hold {chars} characters; the most is {MAX_PROMPT_CHARS}: "
            "shorten the conversation"
        )


def check_stop(stop: Any) -> None:
    """A tuple or list of at most MAX_STOP_STRINGS non-empty strings."""
    if not isinstance(stop, tuple | list):
        hint = " (wrap a single stop string: stop=('...',))" if isinstance(stop, str) else ""
        raise RequestError(f"stop must be a tuple or list of strings, got {_kind(stop)}{hint}")
    if len(stop) > MAX_STOP_STRINGS:
        raise RequestError(f"stop holds {len(stop)} strings; the most is {MAX_STOP_STRINGS}")
    for i, text in enumerate(stop):
        _text(f"stop[{i}]", text, max_length=MAX_STOP_LENGTH, empty=False)


def check_sampling(params: SamplingParams) -> None:
    """Every sampling field, without the model (top-k against the vocabulary: check_top_k)."""
    if not isinstance(params, SamplingParams):
        raise RequestError(f"sampling must be a SamplingParams, got {_kind(params)}")
    name = "sampling."
    if _real(name + "temperature", params.temperature) < 0:
        raise RequestError(
            f"{name}temperature must be >= 0 (0 is greedy), got {params.temperature}"
        )
    if not 0.0 < _real(name + "top_p", params.top_p) <= 1.0:
        raise RequestError(f"{name}top_p must be in (0, 1], got {params.top_p}")
    _integer(name + "top_k", params.top_k, 0, MAX_TOP_K)
    if not 0.0 <= _real(name + "min_p", params.min_p) < 1.0:
        raise RequestError(f"{name}min_p must be in [0, 1), got {params.min_p}")
    if _real(name + "repetition_penalty", params.repetition_penalty) <= 0:
        raise RequestError(
            f"{name}repetition_penalty must be > 0 (1 is off), got {params.repetition_penalty}"
        )
    _integer(name + "repetition_context", params.repetition_context, 1, MAX_REPETITION_CONTEXT)
    if params.seed is not None:
        _integer(name + "seed", params.seed, 0, MAX_SEED)


def check_speculative(params: SpeculativeParams) -> None:
    """Every speculative field, without the engine's state (is a draft model loaded?)."""
    if not isinstance(params, SpeculativeParams):
        raise RequestError(f"speculative must be a SpeculativeParams, got {_kind(params)}")
    name = "speculative."
    spec_method(params.method)
    _integer(name + "draft_tokens", params.draft_tokens, 1, MAX_DRAFT_TOKENS)
    _integer(name + "ngram_min", params.ngram_min, 1, MAX_NGRAM)
    _integer(name + "ngram_max", params.ngram_max, 1, MAX_NGRAM)
    if params.ngram_min > params.ngram_max:
        raise RequestError(
            f"{name}ngram_min must be <= {name}ngram_max, "
            f"got {params.ngram_min} > {params.ngram_max}"
        )
    check_model_spec(name + "draft_model", params.draft_model)


def check_model_spec(name: str, value: Any) -> None:
    """None, or a non-blank string naming a model (a folder or a repo id); whether it exists is
    checked on the engine thread, where it is loaded."""
    if value is None:
        return
    _text(name, value, max_length=MAX_MODEL_SPEC_LENGTH)
    if not value.strip():
        raise RequestError(
            f"{name} must name a model folder or repo id, or be None, got {_show(value)}"
        )
    if "\x00" in value:
        raise RequestError(f"{name} must not contain a NUL character")


def spec_method(value: Any) -> SpecMethod:
    """The SpecMethod that `value` (a member or its string value) names."""
    if isinstance(value, SpecMethod):
        return value
    if isinstance(value, str):
        try:
            return SpecMethod(value)
        except ValueError:
            pass
    choices = _choices(tuple(m.value for m in SpecMethod))
    raise RequestError(f"speculative.method must be one of {choices}, got {_show(value)}")


# -- checks that need the loaded model (run on the engine thread at admission) ---------------


def check_top_k(top_k: int, *, vocab_size: int) -> None:
    if top_k >= vocab_size:
        raise RequestError(
            f"sampling.top_k must be 0 (off) to {vocab_size - 1} for this model's vocabulary, "
            f"got {top_k}"
        )


def check_token_ids(name: str, ids: Any, *, vocab_size: int) -> None:
    """Every id in `ids` (already checked to be ints >= 0) is inside the vocabulary."""
    if not ids or max(ids) < vocab_size:
        return
    for i, token in enumerate(ids):
        if token >= vocab_size:
            raise RequestError(
                f"{name}[{i}] is {token}, outside the vocabulary (0..{vocab_size - 1})"
            )


# -- field checks ----------------------------------------------------------------------------


def _integer(name: str, value: Any, low: int, high: int) -> None:
    # bool is an int subclass, and an int-valued float is still not an integer
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {_show(value)}")
    if not low <= value <= high:
        raise RequestError(f"{name} must be {low} to {high}, got {value}")


def _real(name: str, value: Any) -> float:
    """`value` as a finite float; RequestError naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{name} must be a number, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise RequestError(f"{name} must be a finite number, got {_show(value)}")
    return number


def _text(name: str, value: Any, *, max_length: int | None = None, empty: bool = True) -> None:
    if not isinstance(value, str):
        raise RequestError(f"{name} must be a string, got {_show(value)}")
    if not empty and not value:
        raise RequestError(f"{name} must not be empty")
    if max_length is not None and len(value) > max_length:
        raise RequestError(f"{name} is {len(value)} characters long; the most is {max_length}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        raise RequestError(
            f"{name} cannot be encoded as UTF-8: character {exc.start} is U+{code:04X}, "
            "a lone surrogate"
        ) from None


def _token_list(name: str, value: Any, max_length: int) -> None:
    """A list or tuple of at most `max_length` ints >= 0."""
    if not isinstance(value, list | tuple):
        raise RequestError(f"{name} must be a list of token ids, got {_kind(value)}")
    if len(value) > max_length:
        raise RequestError(f"{name} holds {len(value)} tokens; the most is {max_length}")
    if all(type(t) is int for t in value) and (not value or min(value) >= 0):
        return
    for i, token in enumerate(value):  # name the first bad one
        if type(token) is not int:  # exact: no bool, no numpy integer
            raise RequestError(f"{name}[{i}] must be an integer, got {_show(token)}")
        if token < 0:
            raise RequestError(f"{name}[{i}] must be >= 0, got {token}")


def _show(value: Any) -> str:
    """A short repr of a bad value, with its type when the repr does not say it."""
    text = repr(value)
    if len(text) > DEFAULT_SHOWN_CHARS:
        text = text[: DEFAULT_SHOWN_CHARS - 3] + "..."
    if type(value) in (int, float, str, bool, type(None)):
        return text
    return f"{text} ({type(value).__name__})"


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)
